//go:build !linux

package etcdtest

import "syscall"

// sysProcAttr puts a member in its own process group.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
