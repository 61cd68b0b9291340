package main

import (
	"github.com/urfave/cli/v2"

	"github.com/leaderrun/leaderrun/cmd"
)

// app returns leaderrun's command-line definition. Its actions must never
// run: they would campaign for a lease.
func app() *cli.App { return cmd.App() }
