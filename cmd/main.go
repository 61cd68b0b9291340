// Package cmd is leaderrun's command line: it parses options, wires the
// election loop to the supervised child, and decides the exit code.
package cmd

import (
	"context"
	"errors"
	"io"
	"os"
	"slices"

	"github.com/leaderrun/leaderrun/supervise"
)

// Main runs leaderrun with args (args[0] is the program name) and returns
// its exit code. sigs delivers the signals main subscribed to before
// anything else ran. Main never calls os.Exit, except to re-raise the
// child's fatal signal so that leaderrun's parent sees it.
func Main(sigs <-chan os.Signal, args []string, stdout, stderr io.Writer) int {
	if supervise.IsNamespaceInit() {
		return supervise.RunInit(sigs) // this process is --pid-namespace's init
	}
	flags, command := splitCommand(args)
	app := newApp(sigs, command, stdout, stderr)
	err := refuseRunOptions(flags, app.Flags, app.Commands)
	if err == nil {
		err = app.Run(flags)
	}
	var exit *childExit
	if errors.As(err, &exit) {
		if exit.status.Signal != 0 && !supervise.IsInit() {
			supervise.Reraise(exit.status)
		}
		return exit.status.ExitCode()
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		errorLine(stderr, flags, err)
	}
	return exitCode(err)
}

// splitCommand separates leaderrun's own arguments from the child's: every
// word after the first "--" is the child's, even one that names a
// subcommand.
func splitCommand(args []string) (own, command []string) {
	i := slices.Index(args, "--")
	if i < 0 {
		return args, nil
	}
	return args[:i], args[i+1:]
}

// childExit carries the child's final status out of the app, so Main can
// return or re-raise it.
type childExit struct{ status supervise.Status }

func (e *childExit) Error() string { return "child " + e.status.String() }
