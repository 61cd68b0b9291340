package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/leaderrun/leaderrun/lab/bench/internal/mono"
)

// mark is one file a benchchild wrote: when it started or was told to stop.
type mark struct {
	Kind string // "start" or "stop"
	// Pid and Ppid are the child's own view: in a PID namespace of its own
	// (leaderrun's default) its pid there and its init's, 1. hostPid finds
	// the child's pid in the benchmark's namespace.
	Pid  int
	Ppid int
	// PidNS is the inode of the child's PID namespace (0: not recorded).
	PidNS uint64
	// Holder is LEADERRUN_HOLDER: the identity of the replica running the
	// child ("" under etcdctl lock).
	Holder string
	At     int64 // the child's CLOCK_MONOTONIC reading
	Token  string
	// Partition is LEADERRUN_PARTITION, or -1 when unset.
	Partition int
	// Lock is "1" when the child took its partition's lock, "0" when it
	// found it held by another live child, "-" when it did not try.
	Lock     string
	Detected int64 // when the watcher saw the file, CLOCK_MONOTONIC
}

// watcher reports the marks children write into one directory, through
// inotify (IN_MOVED_TO fires once the child renamed a complete file).
type watcher struct {
	dir    string
	f      *os.File // the inotify instance, non-blocking, in Go's poller
	starts chan mark
	stops  chan mark
	done   chan struct{}
}

func newWatcher(dir string) (*watcher, error) {
	// Non-blocking, so that os.File's poller can wake a pending Read on
	// Close. A plain blocking read(2) would survive close(2) and, once the
	// descriptor number is reused, steal the next watcher's events.
	fd, err := syscall.InotifyInit1(syscall.IN_CLOEXEC | syscall.IN_NONBLOCK)
	if err != nil {
		return nil, fmt.Errorf("inotify: %w", err)
	}
	if _, err := syscall.InotifyAddWatch(fd, dir, syscall.IN_MOVED_TO); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("inotify watch %s: %w", dir, err)
	}
	w := &watcher{dir: dir, f: os.NewFile(uintptr(fd), "inotify:"+dir), starts: make(chan mark, 1024), stops: make(chan mark, 1024), done: make(chan struct{})}
	go w.run()
	return w, nil
}

// close ends the watcher and waits for its goroutine.
func (w *watcher) close() {
	w.f.Close()
	<-w.done
}

func (w *watcher) run() {
	defer close(w.done)
	buf := make([]byte, 64<<10)
	for {
		n, err := w.f.Read(buf)
		if err != nil || n <= 0 {
			return
		}
		now := mono.Now()
		for off := 0; off+syscall.SizeofInotifyEvent <= n; {
			ev := (*syscall.InotifyEvent)(unsafe.Pointer(&buf[off]))
			raw := buf[off+syscall.SizeofInotifyEvent : off+syscall.SizeofInotifyEvent+int(ev.Len)]
			off += syscall.SizeofInotifyEvent + int(ev.Len)
			name := strings.TrimRight(string(raw), "\x00")
			kind, _, ok := strings.Cut(name, "-")
			if !ok || (kind != "start" && kind != "stop") {
				continue
			}
			m, err := readMark(filepath.Join(w.dir, name))
			if err != nil {
				continue
			}
			m.Kind, m.Detected = kind, now
			ch := w.stops
			if kind == "start" {
				ch = w.starts
			}
			select {
			case ch <- m:
			default: // nobody reads this many marks; drop
			}
		}
	}
}

func readMark(path string) (mark, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return mark{}, err
	}
	f := strings.Fields(string(b))
	if len(f) != 8 {
		return mark{}, fmt.Errorf("%s: malformed mark %q", path, b)
	}
	m := mark{Partition: -1, Lock: f[5]}
	if f[6] != "-" {
		m.Holder = f[6]
	}
	if m.PidNS, err = strconv.ParseUint(f[7], 10, 64); err != nil {
		return mark{}, err
	}
	if f[4] != "-" {
		if m.Partition, err = strconv.Atoi(f[4]); err != nil {
			return mark{}, err
		}
	}
	if m.Pid, err = strconv.Atoi(f[0]); err != nil {
		return mark{}, err
	}
	if m.Ppid, err = strconv.Atoi(f[1]); err != nil {
		return mark{}, err
	}
	if m.At, err = strconv.ParseInt(f[2], 10, 64); err != nil {
		return mark{}, err
	}
	m.Token = f[3]
	return m, nil
}

// nextStart waits up to timeout for the next child to start.
func (w *watcher) nextStart(timeout time.Duration) (mark, bool) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case m := <-w.starts:
		return m, true
	case <-t.C:
		return mark{}, false
	}
}

// stopOf waits up to timeout for the stop mark of the child whose start
// mark is start, keeping others for later.
func (w *watcher) stopOf(start mark, timeout time.Duration) (mark, bool) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	var other []mark
	defer func() {
		for _, m := range other {
			w.stops <- m
		}
	}()
	for {
		select {
		case m := <-w.stops:
			if m.Pid == start.Pid && m.PidNS == start.PidNS {
				return m, true
			}
			other = append(other, m)
		case <-t.C:
			return mark{}, false
		}
	}
}

// drainStarts discards start marks already delivered.
func (w *watcher) drainStarts() []mark {
	var ms []mark
	for {
		select {
		case m := <-w.starts:
			ms = append(ms, m)
		default:
			return ms
		}
	}
}
