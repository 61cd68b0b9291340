package supervise

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/internal/testenv/citest"
)

// TestTerminalStaysWithSupervisor runs a supervisor as the foreground job
// of a shell-like session leader on a pseudo-terminal. Its child must run
// in the background, and the supervisor stay the foreground job: the
// terminal's Ctrl-C reaches the supervisor, whatever the child does with
// it.
//
//	test -> tty-session -> tty-shell (session leader, owns the pty)
//	     -> tty-supervise (foreground job) -> Start(tty-report)
func TestTerminalStaysWithSupervisor(t *testing.T) {
	pty, tty, err := openPty()
	if err != nil {
		citest.Missing(t, "no pseudo-terminal: %v", err)
	}
	defer pty.Close()
	defer tty.Close()

	result := filepath.Join(t.TempDir(), "result")
	startHelper(t, Spec{Stdin: tty, Stdout: tty, Stderr: tty}, "tty-session", result)
	if got, want := waitFile(t, result), "child=bg back=true"; got != want {
		t.Errorf("tty-supervise reported %q, want %q", got, want)
	}
}

// ttyHelper runs the helper modes of TestTerminalStaysWithSupervisor.
func ttyHelper(mode string, args []string) int {
	switch mode {
	case "tty-session": // make a session on stdin's terminal; run tty-shell in it
		return run(args, "tty-shell", &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0})
	case "tty-shell": // run tty-supervise as the foreground job, as a shell does
		return run(args, "tty-supervise", &syscall.SysProcAttr{Setpgid: true, Foreground: true, Ctty: 0})
	case "tty-supervise":
		report := args[0] + ".report"
		c, err := Start(Spec{
			Path: os.Args[0],
			Args: []string{os.Args[0], report},
			Env:  helperEnviron(os.Environ(), "tty-report"),
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		select {
		case <-c.Done():
		case <-time.After(testTimeout):
			return 2
		}
		data, _ := os.ReadFile(report)
		writeFile(args[0], fmt.Sprintf("child=%s back=%t", data, isForeground()))
	case "tty-report":
		if isForeground() {
			writeFile(args[0], "fg")
		} else {
			writeFile(args[0], "bg")
		}
	}
	return 0
}

// run runs the test binary in helper mode with attr and returns its exit code.
// It is only used inside helper processes, never by the package under test.
func run(args []string, mode string, attr *syscall.SysProcAttr) int {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = helperEnviron(os.Environ(), mode)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = attr
	if err := cmd.Run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

// isForeground reports whether our group is the foreground group of stdin.
func isForeground() bool {
	pgrp, err := unix.IoctlGetInt(0, unix.TIOCGPGRP)
	return err == nil && pgrp == unix.Getpgrp()
}

// openPty opens a new pseudo-terminal pair.
func openPty() (pty, tty *os.File, err error) {
	fd, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, err
	}
	pty = os.NewFile(uintptr(fd), "/dev/ptmx")
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		pty.Close()
		return nil, nil, err
	}
	n, err := unix.IoctlGetUint32(fd, unix.TIOCGPTN)
	if err != nil {
		pty.Close()
		return nil, nil, err
	}
	tty, err = os.OpenFile("/dev/pts/"+strconv.Itoa(int(n)), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		pty.Close()
		return nil, nil, err
	}
	return pty, tty, nil
}
