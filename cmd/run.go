package cmd

import (
	"context"
	"log/slog"
	"os"

	"github.com/oklog/run"

	"github.com/leaderrun/leaderrun/observe"
	"github.com/leaderrun/leaderrun/podlabel"
	"github.com/leaderrun/leaderrun/replica"
)

// runReplica runs this process's replica (package replica) as an actor
// group with the signal relay, the HTTP endpoints (--http-addr) and
// systemd's watchdog, and returns what the replica's Run returned: the
// command's final status as *replica.Exit, or the error that ended the
// run.
func runReplica(ctx context.Context, sigs <-chan os.Signal, rc runConfig, log *slog.Logger) error {
	if rc.LeaderLabel != nil {
		lb, err := podlabel.New(podlabel.Options{Label: *rc.LeaderLabel, Store: rc.Store, Logger: log.With("name", rc.Name)})
		if err != nil {
			return &usageError{err}
		}
		defer lb.Close()
		rc.Hooks = lb
	}
	r, err := replica.New(rc.Config, log)
	if err != nil {
		return err
	}
	var g run.Group
	quit := make(chan struct{})
	g.Add(func() error { r.RelaySignals(sigs, quit); return nil },
		func(error) { close(quit) })
	g.Add(r.Run, func(error) { r.Stop(0) })
	if rc.HTTPAddr != "" {
		ln, err := observe.Listen(rc.HTTPAddr)
		if err != nil {
			return &usageError{err}
		}
		ctx, cancel := context.WithCancel(ctx)
		g.Add(func() error { return r.Serve(ctx, ln) }, func(error) { cancel() })
	}
	wctx, wcancel := context.WithCancel(ctx)
	g.Add(func() error { r.Watchdog(wctx); <-wctx.Done(); return nil }, func(error) { wcancel() })
	return g.Run()
}
