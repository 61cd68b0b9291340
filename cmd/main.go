// Package cmd is leaderrun's command line: it parses options, wires the
// replica (package replica) to the signals, the HTTP endpoints and
// systemd, and decides the exit code.
package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"syscall"

	"github.com/leaderrun/leaderrun/replica"
	"github.com/leaderrun/leaderrun/supervise"
)

// Main runs leaderrun with args (args[0] is the program name) and returns
// its exit code. sigs delivers the signals main subscribed to before
// anything else ran. Main never calls os.Exit, except to re-raise the
// child's fatal signal so that leaderrun's parent sees it.
func Main(sigs <-chan os.Signal, args []string, stdout, stderr io.Writer) int {
	if supervise.IsNamespaceInit() {
		return supervise.RunInit() // this process is --pid-namespace's init
	}
	flags, command := splitCommand(args)
	app := newApp(sigs, command, output{stdout}, stderr)
	err := refuseRunOptions(flags, app.Flags, app.Commands)
	if err == nil {
		err = refuseMistypedCommand(flags, len(flags) < len(args), app.Flags, app.Commands)
	}
	flags = optionsFirst(flags, app.Flags, app.Commands)
	if err == nil {
		err = app.Run(flags)
	}
	var exit *replica.Exit
	if errors.As(err, &exit) {
		if exit.Status.Killed {
			// The SIGKILL was leaderrun's, after the kill grace: dying by
			// it would read as if something had killed leaderrun itself
			// (systemd: status=9/KILL).
			killedLine(stderr, flags, exit.Status)
			return exit.Status.ExitCode()
		}
		if exit.Status.Signal != 0 {
			passOnLine(stderr, flags, exit.Status)
			supervise.Reraise(exit.Status) // returns at once as PID 1
		}
		return exit.Status.ExitCode()
	}
	if errors.Is(err, errReaderGone) {
		// Quiet, with the status that SIGPIPE gives any other program
		// in a pipeline.
		return 128 + int(syscall.SIGPIPE)
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		errorLine(stderr, flags, err)
	}
	return exitCode(err)
}

// output is the commands' standard output. leaderrun handles SIGPIPE
// (signals.Notify), so a write to a pipe whose reader has gone (status |
// head) fails with EPIPE: output reports that as errReaderGone, which Main
// turns into a quiet exit, and which no other broken pipe (a store's
// connection) can be mistaken for.
type output struct{ w io.Writer }

var errReaderGone = errors.New("the reader of the output has gone")

func (o output) Write(p []byte) (int, error) {
	n, err := o.w.Write(p)
	if errors.Is(err, syscall.EPIPE) {
		err = fmt.Errorf("%w: %w", errReaderGone, err)
	}
	return n, err
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

// passOnLine is leaderrun's last log line when its command died by a
// signal: leaderrun passes that signal on, by dying by it (its parent then
// sees what the command's would), or as PID 1, which the kernel does not
// let die by its own signal, by exiting 128+N.
func passOnLine(w io.Writer, args []string, st supervise.Status) {
	msg := fmt.Sprintf("command %s; leaderrun exits by the same signal", st)
	if supervise.IsInit() {
		msg = fmt.Sprintf("command %s; leaderrun exits %d (128+%d), as PID 1", st, st.ExitCode(), int(st.Signal))
	}
	lastLogger(w, args).Info(msg)
}

// killedLine says that the command had to be killed after the kill grace,
// and the status leaderrun exits with instead of dying by that SIGKILL.
func killedLine(w io.Writer, args []string, st supervise.Status) {
	lastLogger(w, args).Warn(fmt.Sprintf("the command outlived its stop signal's kill grace and was killed; leaderrun exits %d (128+%d)",
		st.ExitCode(), int(st.Signal)))
}

// lastLogger logs leaderrun's last line in the format asked for.
func lastLogger(w io.Writer, args []string) *slog.Logger {
	var h slog.Handler = slog.NewTextHandler(w, nil)
	if jsonRequested(args) {
		h = slog.NewJSONHandler(w, nil)
	}
	return slog.New(h)
}
