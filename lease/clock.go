package lease

import "time"

// A Clock returns the time elapsed since an arbitrary fixed origin. It never
// goes backwards, and it never runs slower than real time.
type Clock func() time.Duration

var processStart = time.Now()

// monotonic is Go's monotonic clock since the process started, BootClock's
// fallback. It stops while the host is suspended.
func monotonic() time.Duration { return time.Since(processStart) }
