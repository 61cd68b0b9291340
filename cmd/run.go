package cmd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/oklog/run"
	"github.com/urfave/cli/v2"

	"github.com/leaderrun/leaderrun/config"

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

// healthFlags are the options of the command's health check and of the
// replica's priority (DESIGN §13), after the other options of running a
// command.
func healthFlags() []cli.Flag {
	const notPartitions = "; not with --partitions"
	return []cli.Flag{
		&cli.StringFlag{Name: "health-cmd", EnvVars: env("health-cmd"), DefaultText: "off",
			Usage: "check the command's health with this shell command (/bin/sh -c, the command's environment) while it runs on the leader; after --health-retries failures in a row the leader hands the name over to a live, eligible replica, or restarts its command when there is none" + notPartitions},
		&cli.DurationFlag{Name: "health-interval", EnvVars: env("health-interval"), Value: config.DefaultHealthInterval,
			Usage: "time between health checks (" + bounds("health-interval") + ")"},
		&cli.DurationFlag{Name: "health-timeout", EnvVars: env("health-timeout"), Value: config.DefaultHealthTimeout,
			Usage: "a check that runs longer fails, and its process group is killed; at most --health-interval (" + bounds("health-timeout") + ")"},
		&cli.IntFlag{Name: "health-retries", EnvVars: env("health-retries"), Value: config.DefaultHealthRetries,
			Usage: "failed checks in a row that make the command unhealthy (1 to " + fmt.Sprint(config.MaxHealthRetries) + ")"},
		&cli.DurationFlag{Name: "health-start-period", EnvVars: env("health-start-period"), DefaultText: "0s: checks from the start",
			Usage: "time after the command's start before checking begins; the first check comes an interval after it (" + bounds("health-start-period") + ")"},
		&cli.DurationFlag{Name: "health-cooldown", EnvVars: env("health-cooldown"), Value: config.DefaultHealthCooldown, DefaultText: shortDuration(config.DefaultHealthCooldown),
			Usage: "after handing the name over for health, this replica is not preferred for this long (" + bounds("health-cooldown") + ")"},
		&cli.Int64Flag{Name: "priority", EnvVars: env("priority"), DefaultText: "0",
			Usage: "higher leads: on a free name, the live candidate of the highest priority takes it; a 32-bit integer" + notPartitions},
		&cli.BoolFlag{Name: "preempt", EnvVars: env("preempt"), DefaultText: "off: leadership is sticky",
			Usage: "take the name over, by a graceful hand-over, from a leader of lower priority once this replica has been a candidate for --preempt-delay" + notPartitions},
		&cli.DurationFlag{Name: "preempt-delay", EnvVars: env("preempt-delay"), Value: config.DefaultPreemptDelay,
			Usage: "how long this replica must have been a live candidate before --preempt takes the name over (" + bounds("preempt-delay") + ")"},
	}
}

// healthOptions reads the options of healthFlags into cfg, and returns
// what is wrong with them that config.Validate cannot tell: a zero the
// user wrote, a check's option without --health-cmd, one of them with
// --partitions.
func healthOptions(c *cli.Context, cfg *config.Config) []string {
	cfg.Health = config.Health{
		Cmd:         c.String("health-cmd"),
		Interval:    c.Duration("health-interval"),
		Timeout:     c.Duration("health-timeout"),
		Retries:     c.Int("health-retries"),
		StartPeriod: c.Duration("health-start-period"),
		Cooldown:    c.Duration("health-cooldown"),
	}
	cfg.Priority, cfg.Preempt, cfg.PreemptDelay = c.Int64("priority"), c.Bool("preempt"), c.Duration("preempt-delay")
	if !c.IsSet("health-timeout") && cfg.Health.Interval > 0 {
		// The default timeout fits any interval the user chose.
		cfg.Health.Timeout = min(cfg.Health.Timeout, cfg.Health.Interval)
	}
	var problems []string
	if c.IsSet("health-cmd") && strings.TrimSpace(cfg.Health.Cmd) == "" {
		problems = append(problems, "--health-cmd: empty: give the shell command that checks the command's health, or leave the option out")
		cfg.Health.Cmd = ""
	}
	for _, opt := range []string{"health-interval", "health-timeout"} {
		if c.IsSet(opt) && c.Duration(opt) == 0 {
			problems = append(problems, fmt.Sprintf("--%s 0s: must be positive (leave the option out for its default)", opt))
		}
	}
	if cfg.Health.Cmd == "" {
		for _, opt := range []string{"health-interval", "health-timeout", "health-retries", "health-start-period", "health-cooldown"} {
			if c.IsSet(opt) && cfg.Partitions == 0 {
				problems = append(problems, fmt.Sprintf("--%s: applies with --health-cmd only", opt))
			}
		}
	}
	if cfg.Partitions > 0 {
		for _, opt := range []string{"health-interval", "health-timeout", "health-retries", "health-start-period", "health-cooldown", "preempt-delay"} {
			if c.IsSet(opt) {
				problems = append(problems, fmt.Sprintf("--%s: cannot be used with --partitions: %s", opt, config.NoHealthWithPartitions))
			}
		}
	}
	return problems
}
