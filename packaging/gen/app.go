package main

import (
	"io"
	"os"
	_ "unsafe" // for go:linkname

	"github.com/urfave/cli/v2"

	_ "github.com/leaderrun/leaderrun/cmd" // defines newApp
)

// app returns leaderrun's command-line definition. Its actions must never
// run: they would campaign for a lease.
func app() *cli.App { return newApp(nil, nil, io.Discard, io.Discard) }

// newApp is cmd's unexported constructor of the CLI, reached by its linker
// name until cmd exports one (the request is cmd.App() *cli.App). The
// signature must match cmd's; the generator's test fails when the
// definition it yields is not leaderrun's.
//
//go:linkname newApp github.com/leaderrun/leaderrun/cmd.newApp
func newApp(sigs <-chan os.Signal, command []string, stdout, stderr io.Writer) *cli.App
