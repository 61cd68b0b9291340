package main

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
// starts tini.
func sigstartMain() {
	if len(os.Args) < 4 {
		fmt.Fprintln(os.Stderr, "usage: sigstart IGNORED BLOCKED PROG [ARG...]")
		os.Exit(2)
	}
	runtime.LockOSThread() // the exec keeps this thread's mask
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
				ignore(sig)
			} else {
				mask.Val[0] |= 1 << (sig - 1)
			}
		}
	}
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &mask, nil); err != nil {
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

// ignore sets sig's disposition to SIG_IGN with rt_sigaction, which
// signal.Ignore does not do for the signals the Go runtime keeps (SEGV):
// a struct sigaction whose handler, its first member, is 1.
func ignore(sig syscall.Signal) {
	var act [64]byte
	*(*uintptr)(unsafe.Pointer(&act[0])) = 1
	const sigsetSize = 8
	if _, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(sig), uintptr(unsafe.Pointer(&act)), 0, sigsetSize, 0, 0); errno != 0 {
		fmt.Fprintln(os.Stderr, "ignore", sig, errno)
		os.Exit(2)
	}
}
