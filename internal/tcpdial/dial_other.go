//go:build !linux

package tcpdial

import "syscall"

// setUserTimeout does nothing where TCP_USER_TIMEOUT is not available;
// keepalive alone then detects a dead peer.
func setUserTimeout(string, string, syscall.RawConn) error { return nil }
