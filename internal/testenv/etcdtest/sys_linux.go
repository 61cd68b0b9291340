package etcdtest

import "syscall"

// sysProcAttr puts a member in its own process group and has the kernel
// kill it when the test binary dies, so that no member outlives the test.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
