// Package earlysig subscribes leaderrun to its signals as the process
// starts: main imports it, and it depends on nothing but package signals,
// so that its init runs within the first milliseconds, before the hundreds
// of packages the store clients bring are initialized. Until a process
// subscribes, the Go runtime ends it on a stop signal (a replica stopped as
// it starts died of SIGTERM instead of exiting as a stopped standby does).
package earlysig

import (
	"os"

	"github.com/leaderrun/leaderrun/signals"
)

// C receives the signals signals.Notify relays, from this package's init
// on; main hands it to cmd.Main. It is buffered, as signals.Notify needs.
var C = make(chan os.Signal, 16)

func init() { signals.Notify(C) }
