// Command goinit is the floor of a Go program as an init, for the "As an
// init" section: it runs its arguments as a command, forwards SIGTERM and
// SIGINT to it, and exits with its status. Nothing more: the Go runtime's
// start, a fork and exec, a wait.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	pid, err := syscall.ForkExec(os.Args[1], os.Args[1:], &syscall.ProcAttr{Env: os.Environ(), Files: []uintptr{0, 1, 2}})
	if err != nil {
		os.Stderr.WriteString("goinit: " + err.Error() + "\n")
		os.Exit(127)
	}
	done := make(chan syscall.WaitStatus, 1)
	go func() {
		var ws syscall.WaitStatus
		for {
			if _, err := syscall.Wait4(pid, &ws, 0, nil); err != syscall.EINTR {
				done <- ws
				return
			}
		}
	}()
	for {
		select {
		case s := <-sigs:
			syscall.Kill(pid, s.(syscall.Signal))
		case ws := <-done:
			if ws.Signaled() {
				os.Exit(128 + int(ws.Signal()))
			}
			os.Exit(ws.ExitStatus())
		}
	}
}
