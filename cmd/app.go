package cmd

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leaderrun/leaderrun/config"
	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/internal/lazyre"
	"github.com/leaderrun/leaderrun/podlabel"
	"github.com/leaderrun/leaderrun/replica"
	"github.com/leaderrun/leaderrun/signals"
)

// Version is set at build time with -ldflags "-X .../cmd.Version=v1.2.3".
var Version = "dev"

const usageText = `leaderrun [options] -- COMMAND [ARG...]
leaderrun status [--json] [--store DSN] [NAME]
leaderrun watch [--json] [--store DSN] NAME
leaderrun step-down [--partition P] [--to IDENTITY | --force] [--window 30s] [--wait [--timeout 1m]] [--store DSN] NAME
leaderrun version | --version
leaderrun help [COMMAND]`

const description = `Every replica runs the same line. Each campaigns for the lease NAME in a
shared store; the one that holds it runs COMMAND, the others stand by. When
the leader stops renewing (crash, partition, shutdown, the command exited),
another replica takes the lease and starts its own COMMAND.

COMMAND runs directly (no shell) in its own process group, with
LEADERRUN_NAME, LEADERRUN_HOLDER and LEADERRUN_TOKEN in its environment.
LEADERRUN_TOKEN strictly increases with every new tenure: make whatever the
command writes reject tokens lower than one it has seen. Everything after
"--" belongs to COMMAND, even a word that names a subcommand.

On lost tenure the command's process group gets --stop-signal and, after
--kill-grace, SIGKILL; descendants that left the group are killed too.

With --partitions N, NAME is split into N partitions spread evenly over the
live replicas; each replica runs one COMMAND per partition it owns, with
LEADERRUN_PARTITION (0 to N-1) and LEADERRUN_PARTITIONS too, and the
partition's own LEADERRUN_TOKEN. A partition moves in order: its command
is stopped, then the partition is released, then another replica starts it.

--name, --store and --store-file also work before status, watch,
step-down and forget; the other options mean nothing there and are
refused.

Examples:
   leaderrun --name relay -- ./relay --port 7000
   leaderrun --name relay --store postgres://app@db/app -- ./relay
   leaderrun --name nightly --once --hold-at-least 1h --acquire-timeout 10s -- ./report.sh
   leaderrun --name ingest --partitions 16 -- ./consume
   leaderrun status --store postgres://app@db/app

Exit status: the command's (with --partitions, 0 once stopped); 124 not
acquired within --acquire-timeout;
125 leaderrun's own error (options, configuration, store refused);
126 command not executable; 127 command not found; 137 the command
outlived its stop signal's --kill-grace and leaderrun killed it. When the
command dies by signal N of anyone else's, leaderrun passes that on: it
dies by the same signal, so that its parent sees what the command's would
have (a shell prints "Killed", systemd counts a SIGTERM death as a clean
stop); as PID 1, which the kernel does not let die by its own signal, it
exits 128+N, as a shell reports it. Its last log line says which.

Manual: leaderrun(1) (man leaderrun), and the README with its pages
(recipes, operating, signals, the guarantees):
https://github.com/leaderrun/leaderrun, which the packages install in
/usr/share/doc/leaderrun.`

// env names the environment variable of an option.
func env(option string) []string {
	return []string{"LEADERRUN_" + strings.ToUpper(strings.ReplaceAll(option, "-", "_"))}
}

// App returns leaderrun's command-line definition, for generating the man
// page and shell completions. Its actions must not be run.
func App() *cli.App { return newApp(nil, nil, io.Discard, io.Discard) }

func newApp(sigs <-chan os.Signal, command []string, stdout, stderr io.Writer) *cli.App {
	cli.VersionFlag = &cli.BoolFlag{Name: "version", Aliases: []string{"v"}, Usage: "print leaderrun's version", DefaultText: "off"}
	cli.AppHelpTemplate = strings.ReplaceAll(cli.AppHelpTemplate, "GLOBAL OPTIONS", "OPTIONS")
	cli.VersionPrinter = func(c *cli.Context) { fmt.Fprintf(c.App.Writer, "leaderrun %s\n", Version) }
	return &cli.App{
		Name:           "leaderrun",
		Usage:          "run a command on exactly one replica at a time",
		UsageText:      usageText,
		Description:    description,
		Version:        Version,
		Writer:         stdout,
		ErrWriter:      stderr,
		ExitErrHandler: func(*cli.Context, error) {}, // Main decides exit codes
		OnUsageError:   onUsageError,
		Flags:          runFlags(),
		Before: func(c *cli.Context) error {
			warnUnknownEnv(c.App.ErrWriter, c.App.Flags)
			return nil
		},
		Action: func(c *cli.Context) error {
			cfg, logs, err := configFrom(c, command)
			if err != nil {
				return err
			}
			return runReplica(c.Context, sigs, cfg, logs.logger(c.App.ErrWriter))
		},
		Commands: withUsageErrors(
			statusCommand(),
			watchCommand(sigs),
			stepDownCommand(sigs),
			forgetCommand(),
			versionCommand(),
		),
	}
}

// withUsageErrors makes every command's bad options an error that Main
// reports (exit 125), instead of a message urfave/cli prints itself.
func withUsageErrors(cmds ...*cli.Command) []*cli.Command {
	for _, c := range cmds {
		c.OnUsageError = onUsageError
	}
	return cmds
}

// singleDash is an option as the flag package names it in its errors
// ("-window"); leaderrun's options are written with two dashes.
var singleDash = lazyre.New(`(^|[^-\w])-([A-Za-z][\w-]*)`)

// undefinedFlag and badValue match the flag package's errors.
var (
	undefinedFlag = lazyre.New(`^flag provided but not defined: -+([\w-]+)$`)
	badValue      = lazyre.New(`^invalid value "([^"]*)" for flag -+([\w-]+)`)
	badEnvValue   = lazyre.New(`^could not parse "([^"]*)" as \w+ value from environment variable "(\w+)" for flag ([\w-]+): (.*)$`)
)

func onUsageError(c *cli.Context, err error, _ bool) error {
	flags := c.App.Flags
	if c.Command != nil && c.Command.Name != "" {
		flags = c.Command.Flags
	}
	msg := err.Error()
	if m := undefinedFlag.FindStringSubmatch(msg); m != nil {
		if guess := nearest(m[1], flagNames(flags)); guess != "" {
			msg += fmt.Sprintf(" (did you mean --%s?)", guess)
		}
	}
	value, flag, why := "", "", ""
	if m := badValue.FindStringSubmatch(msg); m != nil {
		value, flag = m[1], m[2]
	}
	if m := badEnvValue.FindStringSubmatch(msg); m != nil {
		// As a bad --option value is said, not in the library's words.
		value, flag, why = m[1], m[3], m[4]
		msg = fmt.Sprintf("invalid value %q in %s for --%s", value, m[2], flag)
	}
	switch _, nerr := strconv.ParseFloat(value, 64); {
	case flag != "" && isDurationFlag(flags, flag) && nerr == nil:
		msg += fmt.Sprintf(" (a duration needs its unit: %ss, %sms or %sm)", value, value, value)
	case why != "":
		msg += ": " + why
	}
	return &usageError{errors.New(singleDash.ReplaceAllString(msg, "$1--$2"))}
}

func isDurationFlag(flags []cli.Flag, name string) bool {
	return slices.ContainsFunc(flags, func(f cli.Flag) bool {
		_, ok := f.(*cli.DurationFlag)
		return ok && slices.Contains(f.Names(), name)
	})
}

// bounds describes an option's range (config.Bounds) for its help text.
func bounds(option string) string {
	b := config.Bounds["--"+option]
	return shortDuration(b.Min) + " to " + shortDuration(b.Max)
}

// shortDuration writes d as time.Duration does, without zero minutes and
// seconds: 24h, not 24h0m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

func runFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "name", EnvVars: env("name"), Usage: "the lease every replica campaigns for (required)"},
		&cli.StringFlag{Name: "store", EnvVars: env("store"), DefaultText: defaultStoreText,
			Usage: "store DSN: sqlite:PATH, postgres://…, mysql://…, redis://…, etcd://…, k8s://NAMESPACE (see the README)"},
		&cli.StringFlag{Name: "store-file", EnvVars: env("store-file"), TakesFile: true,
			Usage: "read the store DSN from the first line of this file instead, so a password stays out of the process list"},
		&cli.StringFlag{Name: "identity", EnvVars: env("identity"), DefaultText: "host:pid:random", Usage: "this replica's holder identity"},
		&cli.DurationFlag{Name: "ttl", EnvVars: env("ttl"), Value: config.DefaultLeaseDuration,
			Usage: "lease duration the store writes; crash failover takes at most this long (" + bounds("ttl") + ")"},
		&cli.DurationFlag{Name: "renew-interval", EnvVars: env("renew-interval"), DefaultText: "min(2s, renew deadline / 4)",
			Usage: "time between renew attempts (" + bounds("renew-interval") + ")"},
		&cli.DurationFlag{Name: "renew-deadline", EnvVars: env("renew-deadline"), DefaultText: "ttl - kill-grace - 2s (1s for a ttl under 15s)",
			Usage: "how long a leader trusts its tenure after sending its last successful renew (" + bounds("renew-deadline") + ")"},
		&cli.DurationFlag{Name: "kill-grace", EnvVars: env("kill-grace"), Value: config.DefaultKillGrace,
			Usage: "time between the stop signal and SIGKILL (" + bounds("kill-grace") + ")"},
		&cli.StringFlag{Name: "stop-signal", EnvVars: env("stop-signal"), Value: "TERM", Usage: "signal that asks the command to stop (on a lost tenure, and in place of a stop signal other than INT and TERM)"},
		&cli.StringFlag{Name: "stop-on", EnvVars: env("stop-on"), Value: signals.DefaultStopOn.String(),
			Usage: "received signals that stop the command and end leaderrun (comma-separated); every other signal leaderrun catches is only forwarded, as HUP (reload) and QUIT (thread dump) are by default"},
		&cli.BoolFlag{Name: "pid-namespace", EnvVars: env("pid-namespace"), DefaultText: "on where available, else a warning",
			Usage: "run COMMAND as PID 1's child in a new PID namespace (without root: in a user namespace that maps only your own uid and gid), so that every descendant dies with leaderrun, even when leaderrun is SIGKILLed; true requires it (exit 125 where unavailable), false turns it off"},
		&cli.BoolFlag{Name: "once", EnvVars: env("once"), DefaultText: "off",
			Usage: "exit with the command's status after one tenure instead of campaigning again"},
		&cli.DurationFlag{Name: "hold-at-least", EnvVars: env("hold-at-least"), DefaultText: "0s: release at once",
			Usage: "keep the lease, once acquired, for at least this long, also after the command exited, and then let it expire instead of releasing it: with --once, the command runs once per this long across the replicas (" + bounds("hold-at-least") + ")"},
		&cli.DurationFlag{Name: "acquire-timeout", EnvVars: env("acquire-timeout"), DefaultText: "wait for ever",
			Usage: "give up (exit 124) when the lease is not acquired within this long (" + bounds("acquire-timeout") + ")"},
		&cli.DurationFlag{Name: "restart-delay", EnvVars: env("restart-delay"), Value: config.DefaultRestartDelay,
			Usage: "wait before campaigning again after the command exited; doubles on repeated failures, up to 1m (" + bounds("restart-delay") + ")"},
		&cli.IntFlag{Name: "partitions", EnvVars: env("partitions"), DefaultText: "off: one name",
			Usage: "split --name into N partitions (1 to " + fmt.Sprint(config.MaxPartitions) + "), spread over the live replicas, and run one COMMAND per partition this replica owns; every replica must give the same N"},
		&cli.DurationFlag{Name: "reconcile-interval", EnvVars: env("reconcile-interval"), DefaultText: shortDuration(elect.DefaultReconcileInterval),
			Usage: "with --partitions: compare the partitions owned with the balanced target at least this often; changes of members are seen at once (" + bounds("reconcile-interval") + ")"},
		&cli.DurationFlag{Name: "reconcile-timeout", EnvVars: env("reconcile-timeout"), DefaultText: "max(" + shortDuration(elect.DefaultReconcileTimeout) + ", 2 × kill grace)",
			Usage: "with --partitions: a hand-off stuck longer than this takes the replica out of the membership until it completes, so that no more partitions are handed to it (" + bounds("reconcile-timeout") + ")"},
		&cli.StringFlag{Name: "leader-label", EnvVars: env("leader-label"), DefaultText: "off",
			Usage: "in Kubernetes: label this replica's pod KEY=VALUE while its command runs (and remove the label before the name is handed on), so that a Service selecting it routes to the leader alone; the pod is POD_NAME in POD_NAMESPACE (else the host name in the service account's namespace), reached as k8s:// reaches the API server; not with --partitions"},
		&cli.StringFlag{Name: "http-addr", EnvVars: env("http-addr"), DefaultText: "off",
			Usage: "serve /healthz, /leader (200 leading, 503 standby; with --partitions, /partitions instead) and /metrics on this address, e.g. 127.0.0.1:9090"},
		&cli.StringFlag{Name: "log-format", EnvVars: env("log-format"), Value: "text", Usage: "log format: text or json"},
		&cli.StringFlag{Name: "log-level", EnvVars: env("log-level"), Value: "info", Usage: "log level: debug, info, warn or error"},
	}
}

// runConfig is the replica's configuration and the wiring's own options.
type runConfig struct {
	replica.Config
	HTTPAddr    string
	LeaderLabel *podlabel.Label // --leader-label; nil: none
}

// configFrom reads and validates the options; every problem is reported at
// once, as a usage error.
func configFrom(c *cli.Context, command []string) (runConfig, *logSettings, error) {
	if c.Args().Present() {
		if len(command) > 0 {
			return runConfig{}, nil, usagef("unexpected argument %q before --", c.Args().First())
		}
		command = c.Args().Slice()
		warnOptionsAfterCommand(c.App.ErrWriter, command, c.App.Flags)
	}
	store, err := storeDSN(c)
	if err != nil {
		return runConfig{}, nil, err
	}
	rc := runConfig{Config: replica.Config{Config: config.Config{
		Name:     c.String("name"),
		Store:    store,
		Identity: c.String("identity"),
		Timing: config.Timing{
			LeaseDuration: c.Duration("ttl"),
			RenewDeadline: c.Duration("renew-deadline"),
			RetryPeriod:   c.Duration("renew-interval"),
			KillGrace:     c.Duration("kill-grace"),
		},
		Once:           c.Bool("once"),
		HoldAtLeast:    c.Duration("hold-at-least"),
		AcquireTimeout: c.Duration("acquire-timeout"),
		RestartDelay:   c.Duration("restart-delay"),
		Command:        command,

		Partitions:        c.Int("partitions"),
		ReconcileInterval: c.Duration("reconcile-interval"),
		ReconcileTimeout:  c.Duration("reconcile-timeout"),
	}}}
	var problems []string
	// A zero the user wrote is not "the default": say so.
	for _, opt := range []string{"ttl", "renew-interval", "renew-deadline", "kill-grace", "reconcile-interval", "reconcile-timeout", "acquire-timeout"} {
		if c.IsSet(opt) && c.Duration(opt) == 0 {
			problems = append(problems, fmt.Sprintf("--%s 0s: must be positive (leave the option out for its default)", opt))
		}
	}
	if c.IsSet("identity") && rc.Identity == "" {
		problems = append(problems, config.ValidateIdentity("").Error())
	}
	if c.IsSet("partitions") && rc.Partitions == 0 {
		problems = append(problems, fmt.Sprintf("--partitions 0: must be from 1 to %d (leave the option out for one name)", config.MaxPartitions))
	}
	if err := rc.Validate(); err != nil {
		problems = append(problems, strings.Split(err.Error(), "\n")...)
	}
	sig, err := signals.Parse(c.String("stop-signal"))
	if err != nil {
		problems = append(problems, fmt.Sprintf("--stop-signal: %v", err))
	}
	rc.StopSignal = sig
	if rc.StopOn, err = signals.ParseStopOn(c.String("stop-on")); err != nil {
		problems = append(problems, fmt.Sprintf("--stop-on %v", err))
	}
	if c.IsSet("leader-label") {
		switch l, err := podlabel.Parse(c.String("leader-label")); {
		case err != nil:
			problems = append(problems, "--leader-label "+err.Error())
		case rc.Partitions > 0:
			problems = append(problems, "--leader-label: cannot be used with --partitions: the label marks the one pod whose replica runs the command, and with partitions several replicas each run some (route to a partition's owner another way)")
		default:
			rc.LeaderLabel = &l
		}
	}
	rc.HTTPAddr = c.String("http-addr")
	if _, err := strconv.ParseUint(rc.HTTPAddr, 10, 16); err == nil {
		problems = append(problems, fmt.Sprintf("--http-addr %s: a port alone; write :%s (every address) or 127.0.0.1:%s", rc.HTTPAddr, rc.HTTPAddr, rc.HTTPAddr))
	}
	rc.Namespace, rc.NamespaceWarning, err = chooseNamespace(c.IsSet("pid-namespace"), c.Bool("pid-namespace"))
	if err != nil {
		problems = append(problems, fmt.Sprintf("--pid-namespace: %v", err))
	}
	logs, err := newLogSettings(c.String("log-format"), c.String("log-level"))
	if err != nil {
		problems = append(problems, err.Error())
	}
	if len(problems) > 0 {
		return runConfig{}, nil, usagef("%s", strings.Join(problems, "; "))
	}
	return rc, logs, nil
}

func versionCommand() *cli.Command {
	return &cli.Command{
		Name:  "version",
		Usage: "print leaderrun's version",
		Action: func(c *cli.Context) error {
			fmt.Fprintf(c.App.Writer, "leaderrun %s\n", Version)
			return nil
		},
	}
}
