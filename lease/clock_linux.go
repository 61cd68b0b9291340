package lease

import (
	"time"

	"golang.org/x/sys/unix"
)

// BootClock reads CLOCK_BOOTTIME, which unlike Go's monotonic clock keeps
// counting while the host is suspended. Where it cannot be read, BootClock
// falls back to Go's monotonic clock.
func BootClock() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_BOOTTIME, &ts); err != nil {
		return monotonic()
	}
	return time.Duration(ts.Nano())
}
