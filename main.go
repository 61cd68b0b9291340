// Command leaderrun runs a program on exactly one replica of a deployment at
// a time. See the README, or run leaderrun --help.
package main

import (
	"os"
	"time"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/internal/earlysig"
	"github.com/leaderrun/leaderrun/internal/shed"
)

// shedAfter is how long after its start a leaderrun process gives back the
// pages of its executable (see package shed).
const shedAfter = 2 * time.Second

func main() {
	// The signals arrive on earlysig.C, subscribed to before the other
	// packages were initialized. By shedAfter a replica has started and
	// its command runs: most of the executable it touched while starting
	// is never needed again.
	time.AfterFunc(shedAfter, shed.Executable)
	os.Exit(cmd.Main(earlysig.C, os.Args, os.Stdout, os.Stderr))
}
