// Command leaderrun-init is the init of the PID namespaces that leaderrun
// creates (package nsinit), as a program of its own: `make build` embeds it
// into leaderrun. It refuses to run unless leaderrun started it.
package main

import (
	"os"

	"github.com/leaderrun/leaderrun/internal/nsinit"
)

func main() {
	if nsinit.IsExec() {
		os.Exit(nsinit.RunExec()) // starts a command with its signal state
	}
	if !nsinit.IsInit() {
		os.Stderr.WriteString("leaderrun-init: the init of leaderrun's PID namespaces; only leaderrun runs it\n")
		os.Exit(2)
	}
	os.Exit(nsinit.Run())
}
