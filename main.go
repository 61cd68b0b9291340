// Command leaderrun runs a program on exactly one replica of a deployment at
// a time. See the README, or run leaderrun --help.
package main

import (
	"os"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/signals"
)

func main() {
	sigs := make(chan os.Signal, 16)
	signals.Notify(sigs) // first, before anything can start a child
	os.Exit(cmd.Main(sigs, os.Args, os.Stdout, os.Stderr))
}
