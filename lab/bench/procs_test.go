package main

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// hostPid finds a child that records its pid in a PID namespace of its
// own (1 here: it is that namespace's init) as the pid the benchmark sees.
func TestHostPidInPIDNamespace(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID}
	if err := cmd.Start(); err != nil {
		t.Skipf("cannot start a process in a PID namespace of its own: %v", err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	var ns uint64
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		// Until the exec, the child shares this process's namespace files.
		if exe, _ := os.Readlink("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/exe"); exe != "" && exe != mustExecutable(t) {
			ns = pidNamespace(strconv.Itoa(cmd.Process.Pid))
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("sleep did not start within 10 s")
		}
	}
	if ns == 0 || ns == pidNamespace("self") {
		t.Fatalf("sleep's PID namespace %d is not a new one (this process's: %d)", ns, pidNamespace("self"))
	}
	if got, want := hostPid(mark{Pid: 1, PidNS: ns}), cmd.Process.Pid; got != want {
		t.Errorf("hostPid(pid 1 of namespace %d) = %d, want %d", ns, got, want)
	}
	if got := hostPid(mark{Pid: 2, PidNS: ns}); got != 0 {
		t.Errorf("hostPid(pid 2 of namespace %d, which has none) = %d, want 0", ns, got)
	}
	if got, want := hostPid(mark{Pid: os.Getpid(), PidNS: pidNamespace("self")}), os.Getpid(); got != want {
		t.Errorf("hostPid(this process) = %d, want %d", got, want)
	}
}

func mustExecutable(t *testing.T) string {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}
