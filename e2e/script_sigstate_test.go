package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/signals"
)

// sigstartMain is the program sigstart IGNORED BLOCKED PROG [ARG...]: it
// execs PROG with the signals of IGNORED ignored and those of BLOCKED
// blocked (comma-separated names, "-" for none), as tini's sigconf test
// starts tini, and every other signal at its default and unblocked,
// whatever the tests were started with.
func sigstartMain() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: sigstart IGNORED BLOCKED PROG [ARG...]")
		os.Exit(2)
	}
	runtime.LockOSThread() // the exec keeps this thread's mask
	for sig := syscall.Signal(1); sig <= 64; sig++ {
		if sig != syscall.SIGKILL && sig != syscall.SIGSTOP {
			setHandler(sig, 0) // SIG_DFL; the exec resets what the Go runtime handles anyway
		}
	}
	var mask unix.Sigset_t
	for i, list := range os.Args[1:3] {
		for _, name := range strings.Split(list, ",") {
			if name == "-" {
				continue
			}
			sig, err := signals.Parse(name)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				os.Exit(2)
			}
			if i == 0 {
				setHandler(sig, 1) // SIG_IGN
			} else {
				mask.Val[0] |= 1 << (sig - 1)
			}
		}
	}
	if err := unix.PthreadSigmask(unix.SIG_SETMASK, &mask, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	path, err := exec.LookPath(os.Args[3])
	if err == nil {
		err = syscall.Exec(path, os.Args[3:], os.Environ())
	}
	fmt.Fprintln(os.Stderr, err)
	os.Exit(127)
}

// setHandler sets sig's handler to h (0 SIG_DFL, 1 SIG_IGN) with
// rt_sigaction, which signal.Ignore does not do for the signals the Go
// runtime keeps (SEGV): a struct sigaction whose handler is its first
// member. Signals 32 and 33, which the Go runtime keeps to itself, are
// set too: one the tests inherited ignored (a job control shell may
// leave 32 so) would stay ignored across the exec, and the exec comes
// right after.
func setHandler(sig syscall.Signal, h uintptr) {
	var act [64]byte
	*(*uintptr)(unsafe.Pointer(&act[0])) = h
	const sigsetSize = 8
	if _, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, sigsetSize, 0, 0); errno != 0 {
		fmt.Fprintln(os.Stderr, "sigaction", sig, errno)
		os.Exit(2)
	}
}
