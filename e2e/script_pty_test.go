package e2e

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/rogpeppe/go-internal/testscript"
	"golang.org/x/sys/unix"
)

// ptyrun NAME PROG [ARG...]: run PROG in the background as the only job of
// a new session whose controlling terminal is a pseudo-terminal, as a user
// at a terminal runs it: its output goes to $WORK/NAME.out, its exit status
// (128+N for signal N) to $WORK/NAME.exit, and ptykey types on the terminal.
// It starts with every signal at its default and unblocked (through
// sigstart), whatever the tests were started with: leaderrun passes that
// on to its command.
func cmdPtyRun(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: ptyrun NAME PROG [ARG...]")
	}
	name := args[0]
	pty, tty, err := openPty()
	ts.Check(err)
	path, err := lookPathIn("sigstart", ts.Getenv("PATH"))
	ts.Check(err)
	cmd := exec.Command(path, append([]string{"-", "-"}, args[1:]...)...)
	cmd.Args[0] = "sigstart"
	cmd.Dir = ts.Getenv("WORK")
	for _, k := range []string{"PATH", "HOME", "WORK", "LEADERRUN_STORE", "LEADERRUN_PID_NAMESPACE", "TEST_PIDFILE", "TEST_STDERR"} {
		cmd.Env = append(cmd.Env, k+"="+ts.Getenv(k))
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = tty, tty, tty
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true, Ctty: 0}
	ts.Check(cmd.Start())
	tty.Close()
	out, err := os.Create(ts.MkAbs(name + ".out"))
	ts.Check(err)
	go io.Copy(out, pty) // drains the terminal until the session ends
	go func() {
		code := 0
		if err := cmd.Wait(); err != nil {
			ws := cmd.ProcessState.Sys().(syscall.WaitStatus)
			code = ws.ExitStatus()
			if ws.Signaled() {
				code = 128 + int(ws.Signal())
			}
		}
		writeFile(ts.MkAbs(name+".exit"), strconv.Itoa(code))
	}()
	ptys.Store(ts, name, pty)
	ts.Defer(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		pty.Close()
		out.Close()
	})
}

// ptykey NAME KEY: type KEY (ctrl-c, ctrl-z or ctrl-backslash, which send
// the foreground job its signal, or ctrl-d, end of input) on the terminal
// of ptyrun NAME.
func cmdPtyKey(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: ptykey NAME ctrl-c|ctrl-z|ctrl-backslash|ctrl-d")
	}
	keys := map[string]byte{"ctrl-c": 0x03, "ctrl-z": 0x1a, "ctrl-backslash": 0x1c, "ctrl-d": 0x04}
	k, ok := keys[args[1]]
	if !ok {
		ts.Fatalf("unknown key %q", args[1])
	}
	_, err := ptys.Load(ts, args[0]).Write([]byte{k})
	ts.Check(err)
}

// ptytype NAME LINE: type LINE and Enter on the terminal of ptyrun NAME.
func cmdPtyType(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: ptytype NAME LINE")
	}
	_, err := ptys.Load(ts, args[0]).Write([]byte(args[1] + "\n"))
	ts.Check(err)
}

// ptys holds each script's terminals by name.
var ptys = table[*os.File]{}

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
		return nil, nil, fmt.Errorf("open the terminal of a pseudo-terminal: %w", err)
	}
	return pty, tty, nil
}

// lookPathIn finds prog in the directories of path.
func lookPathIn(prog, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, prog)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found in PATH", prog)
}

// waitstate PIDFILE STATE: wait until the process named in PIDFILE is in
// STATE (T stopped, S sleeping, R running; S also accepts R) per /proc.
func cmdWaitState(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitstate PIDFILE STATE")
	}
	pid, want := readPid(ts, args[0]), args[1]
	waitFor(ts, fmt.Sprintf("pid %d in state %s", pid, want), func() bool {
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			return false
		}
		line := string(data)
		i := strings.LastIndexByte(line, ')')
		if i < 0 || i+2 >= len(line) {
			return false
		}
		got := line[i+2 : i+3]
		return got == want || (want == "S" && got == "R")
	})
}
