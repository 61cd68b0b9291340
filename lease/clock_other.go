//go:build !linux

package lease

import "time"

// BootClock is Go's monotonic clock where CLOCK_BOOTTIME does not exist. It
// stops while the host is suspended, so a suspended leader's deadline is
// late by the time it slept.
func BootClock() time.Duration { return monotonic() }
