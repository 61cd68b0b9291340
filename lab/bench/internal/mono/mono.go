// Package mono reads CLOCK_MONOTONIC, which every process on the host
// shares, so that the benchmark and its children can subtract each other's
// readings. Go's own monotonic clock readings are private to a process.
package mono

import (
	"syscall"
	"time"
	"unsafe"
)

const clockMonotonic = 1

// Now is CLOCK_MONOTONIC in nanoseconds.
func Now() int64 {
	var ts syscall.Timespec
	_, _, errno := syscall.RawSyscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0)
	if errno != 0 {
		panic("clock_gettime(CLOCK_MONOTONIC): " + errno.Error())
	}
	return ts.Nano()
}

// Since is the time elapsed from the reading t.
func Since(t int64) time.Duration { return time.Duration(Now() - t) }
