package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// EndSignal is a holder's word to the followers on its host that its
// tenure is over and that its command's whole tree is gone: the write end
// of a pipe that only the holder holds (close-on-exec, so no command
// inherits it), which a follower opens for reading through /proc while the
// holder lives. Send writes endBytes bytes into it, of which each reader
// takes one, and closes it; a holder that dies closes it without writing,
// so its followers read end of file and nothing else. With no store round
// trip, a follower that read a byte may then take the name with
// Store.Seize, which a graceful hand-over otherwise learns
// of only from the store (a PostgreSQL NOTIFY took 1.2 ms p50 to arrive
// after the release was sent; 3 replicas on a 2-core machine).
//
// The holder records the pipe in its Where (EndFD, EndIno). A follower
// checks that the descriptor it opened is a pipe with that inode; on a byte
// it only looks, never kills: the command must have exited and its cgroup
// must be empty or removed (prover_linux.go). Before Send, Stopping may
// write another word (wordStopping, endBytes bytes too), which lets the
// follower that claims it take the name while the command stops.
type EndSignal struct {
	mu       sync.Mutex // guards fd and stopping
	fd       int        // the write end; -1 once closed
	ino      uint64
	stopping bool // Stopping wrote its word
}

// NewEndSignal opens a tenure's end signal.
func NewEndSignal() (*EndSignal, error) {
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC|unix.O_NONBLOCK); err != nil {
		return nil, fmt.Errorf("pipe: %w", err)
	}
	unix.Close(p[0]) // followers open their own read ends
	var st unix.Stat_t
	if err := unix.Fstat(p[1], &st); err != nil {
		unix.Close(p[1])
		return nil, fmt.Errorf("stat the pipe: %w", err)
	}
	return &EndSignal{fd: p[1], ino: st.Ino}, nil
}

// Mark returns w naming s; a nil s leaves w as it is.
func (s *EndSignal) Mark(w Where) Where {
	if s == nil {
		return w
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd >= 0 {
		w.EndFD, w.EndIno = s.fd, s.ino
	}
	return w
}

// Watched reports whether a follower has the end signal open (a pipe
// whose every read end is closed polls as an error for its writer). A nil
// or sent s is not watched.
func (s *EndSignal) Watched() bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd < 0 {
		return false
	}
	revents, ok := pollNow(s.fd, unix.POLLOUT)
	return ok && revents&unix.POLLERR == 0
}

// endBytes is how many followers on one host an EndSignal can tell: each
// takes one byte. (A write this small into an empty pipe is whole.)
const endBytes = 64

// The words an EndSignal sends, one byte each. A leaderrun that knew only
// the end took any byte for it, and checks the tree anyway.
const (
	wordEnded    byte = 0 // the tenure is over and the command's tree gone
	wordStopping byte = 1 // the holder is stopping its command to end the tenure
)

// Stopping tells the followers that the holder has begun to stop its
// command to end the tenure, and will start no other in it: the follower
// that claims the signal may take the name at once, and start its own
// command once Send or the holder's death says the old one is gone. It
// sends only once; a nil or sent s does nothing.
func (s *EndSignal) Stopping() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd >= 0 && !s.stopping {
		s.stopping = true
		s.write(wordStopping)
	}
}

// Send tells the followers that the tenure is over: call it only once the
// command's whole tree is gone and no other will start in the tenure.
// Later calls, and calls on a nil s, do nothing.
func (s *EndSignal) Send() {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd >= 0 {
		s.write(wordEnded)
		unix.Close(s.fd)
		s.fd = -1
	}
}

// write writes endBytes copies of word; s.mu is held.
func (s *EndSignal) write(word byte) {
	var b [endBytes]byte
	for i := range b {
		b[i] = word
	}
	unix.Write(s.fd, b[:]) // EPIPE: nobody watches
}

// endReader is a follower's read end of a holder's EndSignal.
type endReader struct {
	f *os.File // non-blocking, in the runtime's poller
}

// openEnd opens the read end of the EndSignal that w names in the holder
// process, whose pidfd the caller holds (so that w.Pid is that process
// while it lives): /proc/PID/fd/FD, which must be a pipe with inode
// w.EndIno. It returns nil, nil when w names none.
func openEnd(w Where) (*endReader, error) {
	if w.EndIno == 0 {
		return nil, nil
	}
	fd, err := unix.Open(fmt.Sprintf("/proc/%d/fd/%d", w.Pid, w.EndFD), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the leader's end signal: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("stat the leader's end signal: %w", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFIFO || st.Ino != w.EndIno {
		unix.Close(fd)
		return nil, fmt.Errorf("the leader's descriptor %d is not its end signal (mode %#o, inode %d, want a pipe with inode %d)",
			w.EndFD, st.Mode, st.Ino, w.EndIno)
	}
	return &endReader{f: os.NewFile(uintptr(fd), "end-signal")}, nil
}

func (r *endReader) Close() error { return r.f.Close() }

// claim takes the end signal for this follower alone: an exclusive flock
// on the pipe, which the kernel drops when r is closed. Of the followers
// on a host that read the holder's word, the one that claims it seizes the
// name and the others wait for the store to show that: two seizes in
// flight on PostgreSQL took 1.0–1.3 ms each, one alone 0.35 ms (3 replicas
// on a 2-core machine; the hand-off's p50 did not move measurably, as the
// lone seize on an idle connection took 2 ms: bench/findings.md). It
// reports false only when another holds the claim; a flock that fails
// otherwise claims nothing and reports true, as before claims existed.
func (r *endReader) claim() bool {
	rc, err := r.f.SyscallConn()
	if err != nil {
		return true
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) { ferr = unix.Flock(int(fd), unix.LOCK_EX|unix.LOCK_NB) }); err != nil {
		return true
	}
	return !errors.Is(ferr, unix.EWOULDBLOCK)
}

// errNoEnd is read's error for an end signal closed without a word: the
// holder died.
var errNoEnd = errors.New("the leader's end signal closed without a word")

// read blocks until it has read one word of the holder's (nil error), or
// end of file without one (errNoEnd), or until ctx ends.
func (r *endReader) read(ctx context.Context) (byte, error) {
	stop := context.AfterFunc(ctx, func() { r.f.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	var b [1]byte
	_, err := r.f.Read(b[:])
	switch {
	case ctx.Err() != nil:
		return 0, ctx.Err()
	case err == nil:
		return b[0], nil
	case errors.Is(err, io.EOF):
		return 0, errNoEnd
	}
	return 0, fmt.Errorf("read the leader's end signal: %w", err)
}

// treeGone reports, without signalling anything, whether the command and
// its whole tree are gone: the command has exited and, with a cgroup, the
// cgroup is removed or empty. (A command that is the init of a PID
// namespace of its own exits only once the kernel has killed the rest.)
func treeGone(child *process, t tree) error {
	if !child.exited() {
		return errors.New("its command still runs")
	}
	if t.cgroup == "" {
		return nil
	}
	switch empty, _, err := cgroupEmpty(t.cgroup); {
	case err != nil:
		return err
	case !empty:
		return fmt.Errorf("its command's cgroup %s still holds processes", t.cgroup)
	}
	return nil
}
