package samehost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/internal/procstat"
)

// EndSignal is a holder's word to the followers on its host that its
// tenure is over and that its command's whole tree is gone: the write end
// of a FIFO (mode 0600) in its user's runtime directory (endDir), which
// only the holder holds open for writing (close-on-exec, so no command
// inherits it) and which a follower opens for reading by its path while
// the holder lives. Send writes endBytes bytes into it, of which each
// reader takes one, closes it and removes the FIFO; a holder that dies
// closes it without writing, so its followers read end of file and
// nothing else. With no store round trip, a follower that read a byte may
// then take the name with Store.Seize, which a graceful hand-over
// otherwise learns of only from the store, a round trip or more later
// (a PostgreSQL NOTIFY arrives after the release has committed).
//
// A FIFO needs no access to the holder's process: a follower of the same
// user opens it, while the holder's /proc/PID/fd, which this package
// opened before, is closed to it, as leaderrun makes itself non-dumpable
// (root alone could open it).
//
// The holder records the FIFO in its Where (EndPath, EndIno). A follower
// looks before it opens (openEnd): the path must be the holder's own end
// signal file, in its user's directory and named after it, a FIFO with
// that inode owned by the holder's user; on a byte it only looks,
// never kills: the command must have exited and its cgroup must be empty
// or removed (prover_linux.go). Before Send, Stopping may write another
// word (wordStopping, endBytes bytes too), which lets the follower that
// claims it take the name while the command stops.
type EndSignal struct {
	mu       sync.Mutex // guards fd and stopping
	fd       int        // the write end; -1 once closed
	ino      uint64
	path     string
	stopping bool // Stopping wrote its word
	// watchedAtStop: a follower had the signal open when Stopping wrote
	// its word; it may take the name there and close its end before the
	// holder sends the end word (Watched).
	watchedAtStop bool
}

// endSeq numbers the end signals of this process.
var endSeq atomic.Uint64

// NewEndSignal makes a tenure's end signal: a FIFO named
// end-PIDNS-PID-START-SEQ after this process in endDir, which it first
// clears of the FIFOs that dead processes of its PID namespace left.
func NewEndSignal() (*EndSignal, error) {
	s, err := thisProcess()
	if err != nil {
		return nil, err
	}
	dir, err := endDir()
	if err != nil {
		return nil, err
	}
	sweepEnds(dir, s)
	p := filepath.Join(dir, fmt.Sprintf("end-%d-%d-%d-%d", s.PIDNS, s.Pid, s.Start, endSeq.Add(1)))
	if !validEndPath(p) {
		return nil, fmt.Errorf("end signal %.60q: not a clean path of printable characters, or longer than %d bytes", p, maxEndPath)
	}
	// The name is this process's: what is there was left by a process
	// with its pid and start time, on another boot.
	os.Remove(p)
	if err := unix.Mkfifo(p, 0o600); err != nil {
		return nil, fmt.Errorf("make the end signal: %w", err)
	}
	fd, err := openWriteEnd(p)
	if err != nil {
		os.Remove(p)
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		os.Remove(p)
		return nil, fmt.Errorf("stat the end signal: %w", err)
	}
	return &EndSignal{fd: fd, ino: st.Ino, path: p}, nil
}

// openWriteEnd opens the FIFO p for writing alone, without blocking: an
// open for writing fails while no reader has the FIFO open, so it opens
// it for both first. The mode is set again past the umask.
func openWriteEnd(p string) (int, error) {
	const flags = unix.O_NONBLOCK | unix.O_CLOEXEC | unix.O_NOFOLLOW | unix.O_NOCTTY
	rw, err := unix.Open(p, unix.O_RDWR|flags, 0)
	if err != nil {
		return -1, fmt.Errorf("open the end signal: %w", err)
	}
	defer unix.Close(rw)
	fd, err := unix.Open(p, unix.O_WRONLY|flags, 0)
	if err != nil {
		return -1, fmt.Errorf("open the end signal: %w", err)
	}
	if err := unix.Fchmod(fd, 0o600); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("chmod the end signal: %w", err)
	}
	return fd, nil
}

// endDir returns the directory of this user's end signals, made if
// needed: the first of endDirs whose parent is a directory (the last,
// in the temporary directory, is made in any case). It must be a
// directory of this user's that no other may enter (checkEndDir).
func endDir() (string, error) {
	uid := os.Geteuid()
	dirs := endDirs(uid)
	dir := dirs[len(dirs)-1]
	for _, d := range dirs[:len(dirs)-1] {
		if fi, err := os.Stat(filepath.Dir(d)); err == nil && fi.IsDir() {
			dir = d
			break
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("make the end signals' directory: %w", err)
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return "", fmt.Errorf("the end signals' directory: %w", err)
	}
	if err := checkEndDir(st, dir, uint32(uid)); err != nil {
		return "", err
	}
	return dir, nil
}

// endDirs returns the directories where a leaderrun of uid keeps its end
// signals, in the order endDir prefers them: /run/leaderrun for root;
// else leaderrun in $XDG_RUNTIME_DIR (known only for this process's own
// user), then in /run/user/UID; last leaderrun-UID in the temporary
// directory. A follower accepts an end signal only in one of these of the
// holder's user (openEnd).
func endDirs(uid int) []string {
	var dirs []string
	if uid == 0 {
		dirs = append(dirs, "/run/leaderrun")
	} else {
		if d := os.Getenv("XDG_RUNTIME_DIR"); uid == os.Geteuid() && filepath.IsAbs(d) {
			dirs = append(dirs, filepath.Join(d, "leaderrun"))
		}
		dirs = append(dirs, fmt.Sprintf("/run/user/%d/leaderrun", uid))
	}
	return append(dirs, filepath.Join(os.TempDir(), fmt.Sprintf("leaderrun-%d", uid)))
}

// checkEndDir checks that st, what the end signals' directory dir names
// (not followed), is a directory of uid's that no other user may enter.
func checkEndDir(st unix.Stat_t, dir string, uid uint32) error {
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fmt.Errorf("the end signals' directory %s is not a directory", dir)
	case st.Uid != uid:
		return fmt.Errorf("the end signals' directory %s belongs to uid %d, not to %d", dir, st.Uid, uid)
	case st.Mode&0o077 != 0:
		return fmt.Errorf("the end signals' directory %s may be used by others (mode %#o, want 0700)", dir, st.Mode&0o777)
	}
	return nil
}

// sweepEnds removes from dir the FIFOs that processes of this PID
// namespace left that no longer run (killed, they did not remove them).
func sweepEnds(dir string, s self) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		var ns, start, seq uint64
		var pid int
		if n, err := fmt.Sscanf(e.Name(), "end-%d-%d-%d-%d", &ns, &pid, &start, &seq); err != nil || n != 4 ||
			ns != s.PIDNS || e.Type() != fs.ModeNamedPipe {
			continue
		}
		if st, err := procstat.Read(pid); err == nil && st.Start == start {
			continue // it runs (this process, too)
		}
		os.Remove(filepath.Join(dir, e.Name()))
	}
}

// Mark returns w naming s; a nil s leaves w as it is.
func (s *EndSignal) Mark(w Where) Where {
	if s == nil {
		return w
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fd >= 0 {
		w.EndPath, w.EndIno = s.path, s.ino
	}
	return w
}

// Watched reports whether a follower has the end signal open (a FIFO
// whose every read end is closed polls as an error for its writer), or had
// it open when Stopping wrote its word: the follower that claims that word
// may prove the tenure over at the command's end and close its end before
// the end word. A nil or sent s is not watched.
func (s *EndSignal) Watched() bool {
	if s == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fd >= 0 && (s.watchedAtStop || s.readLocked())
}

// readLocked reports whether a follower has the end signal open; s.mu is
// held and s.fd open.
func (s *EndSignal) readLocked() bool {
	revents, ok := pollNow(s.fd, unix.POLLOUT)
	return ok && revents&unix.POLLERR == 0
}

// endBytes is how many followers on one host an EndSignal can tell: each
// takes one byte. (A write this small into an empty FIFO is whole.)
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
		s.stopping, s.watchedAtStop = true, s.readLocked()
		s.write(wordStopping)
	}
}

// Send tells the followers that the tenure is over: call it only once the
// command's whole tree is gone and no other will start in the tenure. It
// removes the FIFO (the followers that opened it read on). Later calls,
// and calls on a nil s, do nothing.
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
		os.Remove(s.path)
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

// openEnd opens the read end of the EndSignal that w names, of the holder
// process whose pidfd the caller holds (so that w.Pid is that process
// while it lives). It returns nil, nil when w names none. The path comes
// from the store, where anyone with access may have written anything, so
// it must be exactly the holder's own end signal file, and it looks
// before it opens: the path's directory must be one of endDirs of the
// holder's user, and, not followed should it be a symbolic link, a
// directory of that user's that no other may enter; the file's name must
// be the one NewEndSignal gives, after the PID namespace, pid and start
// time that w names; and the file, looked up from the checked directory
// and not followed should it be a link, must be a FIFO with inode
// w.EndIno that belongs to the holder's user and that no other may
// write. Only then does it open that very file (through the descriptor
// that looked, which opened nothing: no device's open ran, no terminal
// became this process's), for reading, without blocking and with
// O_NOCTTY; checks that the holder still lives, with its start time, so
// that the user read was the holder's; and checks again what it opened.
func openEnd(w Where, holder *process) (*endReader, error) {
	if w.EndIno == 0 {
		return nil, nil
	}
	uid, err := holder.uid()
	if err != nil {
		return nil, err
	}
	dir, name := filepath.Split(w.EndPath)
	dir = filepath.Clean(dir)
	if err := isEndName(w, dir, name, uid); err != nil {
		return nil, fmt.Errorf("%w: %w", errNotEnd, err)
	}
	dirfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("look up the leader's end signals' directory: %w", err)
	}
	defer unix.Close(dirfd)
	var st unix.Stat_t
	if err := unix.Fstat(dirfd, &st); err != nil {
		return nil, fmt.Errorf("stat the leader's end signals' directory: %w", err)
	}
	if err := checkEndDir(st, dir, uid); err != nil {
		return nil, fmt.Errorf("%w: %w", errNotEnd, err)
	}
	look, err := unix.Openat(dirfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("look up the leader's end signal: %w", err)
	}
	defer unix.Close(look)
	if err := unix.Fstat(look, &st); err != nil {
		return nil, fmt.Errorf("stat the leader's end signal: %w", err)
	}
	if err := isEnd(st, w, uid); err != nil {
		return nil, err
	}
	fd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", look), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("open the leader's end signal: %w", err)
	}
	var again unix.Stat_t
	switch err := holder.lives(w.Start); {
	case err != nil:
		unix.Close(fd)
		return nil, err
	case unix.Fstat(fd, &again) != nil || again.Dev != st.Dev || again.Ino != st.Ino:
		unix.Close(fd)
		return nil, fmt.Errorf("the leader's end signal %s changed as it was opened", w.EndPath)
	}
	return &endReader{f: os.NewFile(uintptr(fd), "end-signal")}, nil
}

// removeDeadEnd removes the end signal that w names, of a holder of user
// uid that is dead (its own removal died with it), when it is still that
// holder's: the same checks as openEnd's, then an unlink relative to the
// checked directory. What it cannot check or remove it leaves: the next
// end signal made in that directory sweeps it (sweepEnds).
func removeDeadEnd(w Where, uid uint32) {
	if w.EndIno == 0 {
		return
	}
	dir, name := filepath.Split(w.EndPath)
	dir = filepath.Clean(dir)
	if isEndName(w, dir, name, uid) != nil {
		return
	}
	dirfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(dirfd)
	var st unix.Stat_t
	if unix.Fstat(dirfd, &st) != nil || checkEndDir(st, dir, uid) != nil {
		return
	}
	if unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || isEnd(st, w, uid) != nil {
		return
	}
	_ = unix.Unlinkat(dirfd, name, 0)
}

// errNotEnd is wrapped by openEnd's error for a path that names
// something else than the holder's end signal: a record that is stale or
// was forged.
var errNotEnd = errors.New("not the leader's end signal; not opened")

// isEndName checks that dir and name, w's end signal path split, are
// where the holder of uid that w names keeps its end signal: dir one of
// endDirs(uid), name end-PIDNS-PID-START-SEQ after w.
func isEndName(w Where, dir, name string, uid uint32) error {
	if !slices.Contains(endDirs(int(uid)), dir) {
		return fmt.Errorf("the leader's end signal %s is not in an end signals' directory of uid %d", w.EndPath, uid)
	}
	seq, ok := strings.CutPrefix(name, fmt.Sprintf("end-%d-%d-%d-", w.PIDNS, w.Pid, w.Start))
	if n, err := parseDecimal(seq); !ok || err != nil || n == 0 {
		return fmt.Errorf("the leader's end signal %s is not named after the leader", w.EndPath)
	}
	return nil
}

// isEnd checks that st, what w's end signal path names, is a FIFO with
// inode w.EndIno that belongs to uid and that no other may write.
func isEnd(st unix.Stat_t, w Where, uid uint32) error {
	if err := endMismatch(st, w, uid); err != nil {
		return fmt.Errorf("%w: %w", errNotEnd, err)
	}
	return nil
}

func endMismatch(st unix.Stat_t, w Where, uid uint32) error {
	switch {
	case st.Mode&unix.S_IFMT != unix.S_IFIFO:
		return fmt.Errorf("the leader's end signal %s is not a FIFO (mode %#o)", w.EndPath, st.Mode)
	case st.Ino != w.EndIno:
		return fmt.Errorf("the leader's end signal %s is inode %d, not %d", w.EndPath, st.Ino, w.EndIno)
	case st.Uid != uid:
		return fmt.Errorf("the leader's end signal %s belongs to uid %d, not to the leader's %d", w.EndPath, st.Uid, uid)
	case st.Mode&0o022 != 0:
		return fmt.Errorf("the leader's end signal %s may be written by others (mode %#o)", w.EndPath, st.Mode&0o777)
	}
	return nil
}

func (r *endReader) Close() error { return r.f.Close() }

// claim takes the end signal for this follower alone: an exclusive flock
// on the pipe, which the kernel drops when r is closed. Of the followers
// on a host that read the holder's word, the one that claims it seizes the
// name and the others wait for the store to show that: two seizes in
// flight contend for the same row, and each takes longer than one alone
// (bench/findings.md). It
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
