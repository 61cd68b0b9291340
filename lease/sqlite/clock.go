package sqlite

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// hostClock is the store's clock: milliseconds on a clock every process on
// the host reads alike, and the identity of that clock (the boot id), which
// tells whether a stored reading can be compared with a fresh one.
type hostClock struct {
	bootID string
	// mono is true when readings come from CLOCK_MONOTONIC, false for the
	// wall-clock fallback.
	mono bool
	// virtual, set by tests only, replaces both clocks.
	virtual func() time.Time
}

// wallBootID marks rows written by a process that could not read the boot
// id and used wall-clock milliseconds instead.
const wallBootID = "wall-clock"

// bootIDPath is where Linux publishes the random id of the current boot.
const bootIDPath = "/proc/sys/kernel/random/boot_id"

var theClock = sync.OnceValue(func() hostClock {
	b, err := os.ReadFile(bootIDPath)
	id := strings.TrimSpace(string(b))
	var ts unix.Timespec
	if err != nil || id == "" || unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts) != nil {
		return hostClock{bootID: wallBootID}
	}
	return hostClock{bootID: id, mono: true}
})

// reading is one look at the store's clock and at the wall clock, taken
// together so that store times can be converted to wall time.
type reading struct {
	// nanos is the store clock in nanoseconds.
	nanos int64
	wall  time.Time
}

// millis is the store clock in whole milliseconds, rounded down.
func (r reading) millis() int64 { return r.nanos / int64(time.Millisecond) }

// wallMillis is the wall clock in milliseconds, the floor of a new token.
func (r reading) wallMillis() int64 { return r.wall.UnixMilli() }

// now reads the clock. Once the monotonic clock was readable it never falls
// back to the wall clock, whose readings would be taken for times far in
// the future; failing to read it is an error instead.
func (c hostClock) now() (reading, error) {
	if c.virtual != nil {
		t := c.virtual()
		return reading{nanos: t.UnixNano(), wall: t}, nil
	}
	wall := time.Now()
	if !c.mono {
		return reading{nanos: wall.UnixNano(), wall: wall}, nil
	}
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return reading{}, fmt.Errorf("read CLOCK_MONOTONIC: %w", err)
	}
	return reading{nanos: ts.Nano(), wall: wall}, nil
}

// wallTime converts a store-clock reading in milliseconds to wall time.
func (r reading) wallTime(ms int64) time.Time {
	return r.wall.Add(time.Duration(ms*int64(time.Millisecond) - r.nanos))
}

// until is how long from r until the store-clock reading ms.
func (r reading) until(ms int64) time.Duration {
	return time.Duration(ms*int64(time.Millisecond) - r.nanos)
}
