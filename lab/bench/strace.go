package main

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/lab/bench/internal/mono"
)

// syscallCounts maps a system call's name to how often it was made.
type syscallCounts map[string]int64

func (c syscallCounts) fsyncs() int64 { return c["fsync"] + c["fdatasync"] }

// traced is what strace saw a set of processes do with their SQLite
// files.
type traced struct {
	Calls syscallCounts
	// ReadLocks counts read locks taken on one of the WAL index's
	// read-mark bytes: every SQLite transaction in WAL mode, a read or a
	// write, begins by taking one, and so does every retry of a write
	// transaction that found the writer's lock taken (SQLite ends the
	// transaction and begins it again from its busy handler).
	ReadLocks int64
	// Writes counts the WAL index's write lock taken: one per write
	// transaction. Busy counts the attempts to take it that failed
	// because another connection held it, each of which was retried.
	Writes, Busy int64
}

// Reads is the read transactions: read locks not taken for a write
// attempt.
func (t traced) Reads() int64 { return max(0, t.ReadLocks-t.Writes-t.Busy) }

// The WAL index (the -shm file) keeps its locks at byte 120 (the writer),
// 121–122 (checkpointer, recovery) and 123–127 (the five read marks).
const (
	walWriteLock = 120
	walReadFirst = 123
	walReadLast  = 127
)

// straceSyscalls are the system calls traced: the locks (every
// transaction), and the I/O shown for the record.
const straceSyscalls = "fcntl,fsync,fdatasync,pwrite64,pread64"

var (
	straceLine  = regexp.MustCompile(`^(?:(\d+) +)?([a-z0-9_]+)\((.*)`)
	resumedLine = regexp.MustCompile(`^(?:(\d+) +)?<\.\.\. ([a-z0-9_]+) resumed>(.*)`)
	lockArgs    = regexp.MustCompile(`F_SETLKW?, \{l_type=(F_RDLCK|F_WRLCK|F_UNLCK), l_whence=SEEK_SET, l_start=(\d+), l_len=1`)
)

// parseStraceTrace reads the lines `strace -f -e trace=… -o FILE` wrote.
// A call that another thread interrupted is written twice, "<unfinished
// ...>" with its arguments, then "<... resumed>" with its result; it
// counts once, judged by both.
func parseStraceTrace(path string) (traced, error) {
	f, err := os.Open(path)
	if err != nil {
		return traced{}, err
	}
	defer f.Close()
	t := traced{Calls: syscallCounts{}}
	lock := func(args, result string) {
		a := lockArgs.FindStringSubmatch(args)
		if a == nil {
			return
		}
		ok := strings.HasPrefix(strings.TrimSpace(result), "= 0")
		at, _ := strconv.Atoi(a[2])
		switch {
		case a[1] == "F_RDLCK" && at >= walReadFirst && at <= walReadLast && ok:
			t.ReadLocks++
		case a[1] == "F_WRLCK" && at == walWriteLock && ok:
			t.Writes++
		case a[1] == "F_WRLCK" && at == walWriteLock:
			t.Busy++
		}
	}
	pending := map[string]string{} // by thread: the arguments of an unfinished fcntl
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := resumedLine.FindStringSubmatch(line); m != nil {
			if args, ok := pending[m[1]]; ok && m[2] == "fcntl" {
				delete(pending, m[1])
				_, result, _ := strings.Cut(m[3], ")")
				lock(args, result)
			}
			continue
		}
		m := straceLine.FindStringSubmatch(line)
		if m == nil {
			continue // "+++ exited", "--- SIGURG"
		}
		t.Calls[m[2]]++
		if m[2] != "fcntl" {
			continue
		}
		if args, ok := strings.CutSuffix(m[3], " <unfinished ...>"); ok {
			pending[m[1]] = args
			continue
		}
		_, result, _ := strings.Cut(m[3], ")")
		lock(m[3], result)
	}
	return t, sc.Err()
}

// straceAttach traces pids (every thread) for window, then detaches. It
// returns what they did and the measured window.
func (b *bench) straceAttach(label string, pids []int, window time.Duration) (traced, time.Duration, error) {
	out := b.tmpPath(sanitize(label) + ".strace")
	argv := []string{b.strace, "-f", "-e", "trace=" + straceSyscalls, "-o", out}
	var markers []string
	for _, p := range pids {
		argv = append(argv, "-p", strconv.Itoa(p))
		markers = append(markers, fmt.Sprintf("Process %d attached", p))
	}
	sp, err := b.procs.start("strace-"+label, argv, nil, markers...)
	if err != nil {
		return traced{}, 0, err
	}
	for _, m := range markers {
		if err := sp.waitMark(m, 10*time.Second); err != nil {
			sp.killGroup(syscall.SIGKILL)
			return traced{}, 0, err
		}
	}
	t0 := mono.Now()
	b.sleep(window)
	syscall.Kill(sp.pid, syscall.SIGINT)
	got := mono.Since(t0)
	if !sp.wait(20 * time.Second) {
		sp.killGroup(syscall.SIGKILL)
		return traced{}, 0, fmt.Errorf("strace did not detach")
	}
	t, err := parseStraceTrace(out)
	return t, got, err
}

// describe names the counts for the report.
func (t traced) describe(secs float64) string {
	var parts []string
	for _, k := range strings.Split(straceSyscalls, ",") {
		if n := t.Calls[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%.2f %s", float64(n)/secs, k))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
