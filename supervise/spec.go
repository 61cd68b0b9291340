package supervise

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/internal/nsinit"
)

// Spec describes the child to run. The zero value of every field except Path
// and Args has a useful default.
type Spec struct {
	// Path names the program. A name without a slash is looked up in the
	// PATH of Env (or of this process when Env has none); relative PATH
	// entries are ignored. A relative path is relative to Dir.
	Path string
	// Args is the argument vector, including argv[0].
	Args []string
	// Env is the child's full environment; nil means this process's.
	// NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID are always removed.
	Env []string
	// Dir is the child's working directory; empty means this process's.
	Dir string
	// StopSignal is sent to the child's group first by Stop; zero means SIGTERM.
	StopSignal syscall.Signal
	// KillGrace is how long Stop waits after StopSignal before SIGKILL;
	// zero means 5s.
	KillGrace time.Duration
	// Stdin, Stdout and Stderr are the child's standard files; nil means
	// this process's own.
	Stdin, Stdout, Stderr *os.File
	// Logger receives the package's log lines; nil discards them.
	Logger *slog.Logger
	// Namespace ties the command's whole process tree to this process's
	// life (see Namespace). With any but NoNamespace, the command runs
	// under a small init (package nsinit: the embedded leaderrun-init, or
	// this program again; see RunInit) that is PID 1 of a new PID
	// namespace, so that every descendant dies with it even when this
	// process is SIGKILLed; Start fails with ErrNamespace when the kernel
	// refuses the namespace. The program must call RunInit first thing
	// when IsNamespaceInit reports true.
	Namespace Namespace
	// Resumable is asked, when this process is continued after a
	// job-control stop (Suspend) that froze the command's whole tree,
	// whether the tree may run again; false: the tree is killed while
	// still frozen. It must answer at once. Nil means yes.
	Resumable func() bool
	// Proved says that the caller proved every process of the tenure
	// before its own gone (a takeover on this host, package samehost): Start
	// then leaves what dead leaderrun processes left in their cgroups to
	// the next Start, off the new command's way (reading /proc and the
	// cgroup tree is not free, and nothing dead can be there).
	Proved bool

	prepared     bool // an init that waits for the word to run the command (Prepare)
	probe        bool // an init that runs nothing (ProbeNamespace)
	noCgroup     bool // no cgroup of its own (the namespace's init's command, a probe)
	clearAmbient bool // clear the forking thread's ambient capabilities (a user namespace's init)
}

// Defaults for the zero values of Spec.
const (
	DefaultStopSignal = syscall.SIGTERM
	DefaultKillGrace  = 5 * time.Second
)

var (
	// ErrNotFound means the command does not exist (exit code 127).
	ErrNotFound = errors.New("command not found")
	// ErrNotExecutable means the command exists but cannot be executed:
	// no permission, a directory, or not a valid executable (exit code 126).
	ErrNotExecutable = errors.New("command not executable")
)

// strippedEnv lists the variables that address this process's own
// supervisor (systemd) and must not leak to the child.
var strippedEnv = []string{"NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID", tagEnv, nsinit.StopsEnv,
	nsinit.SignalsEnv, nsinit.ExecEnv}

// withDefaults returns s with its zero values replaced by their defaults and
// the supervisor's variables removed from Env.
func (s Spec) withDefaults() Spec {
	if s.StopSignal == 0 {
		s.StopSignal = DefaultStopSignal
	}
	if s.KillGrace == 0 {
		s.KillGrace = DefaultKillGrace
	}
	if s.Stdin == nil {
		s.Stdin = os.Stdin
	}
	if s.Stdout == nil {
		s.Stdout = os.Stdout
	}
	if s.Stderr == nil {
		s.Stderr = os.Stderr
	}
	if s.Logger == nil {
		s.Logger = slog.New(slog.DiscardHandler)
	}
	if s.Env == nil {
		s.Env = os.Environ()
	}
	s.Env = stripEnv(s.Env)
	return s
}

// stripEnv returns a copy of env without the variables in strippedEnv.
func stripEnv(env []string) []string {
	out := make([]string, 0, len(env))
next:
	for _, kv := range env {
		key, _, _ := strings.Cut(kv, "=")
		for _, k := range strippedEnv {
			if key == k {
				continue next
			}
		}
		out = append(out, kv)
	}
	return out
}

// Check reports whether Start could execute the command that spec names,
// without starting anything: the error wraps ErrNotFound or
// ErrNotExecutable. leaderrun calls it before it campaigns, so that a
// replica whose command is broken says so at once instead of at failover.
func Check(spec Spec) error {
	spec = spec.withDefaults()
	_, err := spec.lookPath()
	return err
}

// lookPath resolves s.Path the way execvp does, against the PATH in s.Env.
// The error wraps ErrNotFound or ErrNotExecutable.
func (s Spec) lookPath() (string, error) {
	if s.Path == "" {
		return "", fmt.Errorf("start %q: %w", s.Path, ErrNotFound)
	}
	if strings.Contains(s.Path, "/") {
		p := s.Path
		if s.Dir != "" && !filepath.IsAbs(p) {
			p = filepath.Join(s.Dir, p)
		}
		if err := checkExecutable(p); err != nil {
			return "", fmt.Errorf("start %q: %w", s.Path, err)
		}
		return s.Path, nil
	}
	denied := false
	for _, dir := range filepath.SplitList(s.pathEnv()) {
		if !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, s.Path)
		err := checkExecutable(p)
		if err == nil {
			return p, nil
		}
		if errors.Is(err, ErrNotExecutable) {
			denied = true
		}
	}
	if denied {
		return "", fmt.Errorf("start %q: %w", s.Path, ErrNotExecutable)
	}
	return "", fmt.Errorf("start %q: %w", s.Path, ErrNotFound)
}

// pathEnv returns the PATH the command is looked up in.
func (s Spec) pathEnv() string {
	for i := len(s.Env) - 1; i >= 0; i-- {
		if v, ok := strings.CutPrefix(s.Env[i], "PATH="); ok {
			return v
		}
	}
	return os.Getenv("PATH")
}

// checkExecutable reports whether p names an executable regular file, with
// an error wrapping ErrNotFound or ErrNotExecutable when it does not.
func checkExecutable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return ErrNotFound
		}
		return fmt.Errorf("%w: %w", ErrNotExecutable, err)
	}
	if fi.IsDir() {
		return fmt.Errorf("%w: is a directory", ErrNotExecutable)
	}
	if err := unix.Faccessat(unix.AT_FDCWD, p, unix.X_OK, unix.AT_EACCESS); err != nil {
		return fmt.Errorf("%w: %w", ErrNotExecutable, err)
	}
	return nil
}

// forkError maps an error from fork/exec to ErrNotFound or ErrNotExecutable
// where it means one of them.
func forkError(path string, err error) error {
	switch {
	case errors.Is(err, syscall.ENOENT), errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("start %q: %w: %w", path, ErrNotFound, err)
	case errors.Is(err, syscall.EACCES), errors.Is(err, syscall.ENOEXEC),
		errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.EPERM):
		return fmt.Errorf("start %q: %w: %w", path, ErrNotExecutable, err)
	}
	return fmt.Errorf("start %q: %w", path, err)
}
