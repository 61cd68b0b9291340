package cmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leaderrun/leaderrun/config"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/observe"
)

// Defaults of step-down's options.
const (
	defaultStepDownWindow  = 30 * time.Second
	defaultStepDownTimeout = time.Minute
)

// errNoNewLeader ends a step-down --wait that ran out of --timeout.
var errNoNewLeader = errors.New("no new leader within --timeout")

// errStepDownRefused marks a step-down the store refused because of what
// the name's state is (nobody holds it, an unknown successor): exit 1.
var errStepDownRefused = errors.New("step-down refused")

func stepDownCommand(sigs <-chan os.Signal) *cli.Command {
	return &cli.Command{
		Name:      "step-down",
		Usage:     "ask the current leader of a name to hand it over to another replica",
		UsageText: "leaderrun step-down [--partition P] [--to IDENTITY | --force] [--window 30s] [--wait [--timeout 1m]] [--store DSN] NAME",
		Description: `The leader notices at once (through the store's wake-up; at the latest at
its next renewal), stops its command gracefully as on any lost tenure, and
releases the name; without --to, a follower on the leader's host takes it
over while that command stops, and starts its own once the old one's whole
tree is gone. For
--window after the request, only --to IDENTITY may take the name or, without
--to, anyone but the leader that stepped down; after the window anyone may.
IDENTITY must be a replica campaigning for the name (its --identity). With
--wait, returns once another replica holds the name under a new token and
prints it.

A replica campaigns for the name, for --to and for the refusal below, when
it tried to take the name within twice its --ttl and has not stopped
cleanly since: a replica stopped by SIGTERM or SIGINT, or one that ended
(--once, --acquire-timeout), withdraws from the store at once; one that
crashed (SIGKILL, a power cut) counts until twice its --ttl has passed. Without
--to, a step-down is refused when no other replica campaigns, and the
leader's command runs on; --force steps down all the same: the command
stops, nobody takes over, and the old leader takes the name back after
--window.

For a name run with --partitions, --partition P moves partition P the same
way: its owner stops P's command and releases it, and --to (a live member of
the group) or, without --to, another member takes it; the member that
stepped down takes it back no sooner than --window.

Exit status: 0 done; 1 nobody holds the name (released or expired), --to
names an identity that is not campaigning or already leads, the name went
back to the same holder, no other replica is campaigning (without --to
and --force), the store could not be reached, or another failure; 4 no
such name; 124 --wait saw no new leader within --timeout; 125 bad options,
or a store that refused leaderrun (a wrong password, a missing privilege, a
DSN it cannot use). A refused step-down changes nothing in the store.`,
		Flags: append(storeFlags(),
			&cli.StringFlag{Name: "name", EnvVars: env("name"), Usage: "the name whose leader steps down (required; or give it as the argument)"},
			&cli.IntFlag{Name: "partition", DefaultText: "none; required for a name run with --partitions", Usage: "with a name run with --partitions: the partition to move (0 to N-1)"},
			&cli.StringFlag{Name: "to", Usage: "the identity of the replica that should take over (default: any other)"},
			&cli.DurationFlag{Name: "window", Value: defaultStepDownWindow, Usage: "how long the name stays reserved for --to, or closed to the old leader"},
			&cli.BoolFlag{Name: "wait", Usage: "wait until a new leader holds the name, and print it"},
			&cli.BoolFlag{Name: "force", Usage: "step down even when no other replica is campaigning for the name, so that its command stops with no successor for --window"},
			&cli.DurationFlag{Name: "timeout", Value: defaultStepDownTimeout, Usage: "with --wait: give up (exit 124) after this long"},
		),
		Action: func(c *cli.Context) error { return runStepDown(c, sigs) },
	}
}

func runStepDown(c *cli.Context, sigs <-chan os.Signal) error {
	name, err := nameArg(c)
	if err != nil {
		return err
	}
	to, window := c.String("to"), c.Duration("window")
	if err := config.ValidateName(name); err != nil {
		return err
	}
	switch {
	case c.IsSet("to") && to == "":
		return usagef("--to: empty identity")
	case to != "" && config.ValidateIdentity(to) != nil:
		return usagef("--to %q: must be an identity: no spaces or control characters, at most %d bytes of UTF-8", to, config.MaxNameLen)
	case window < time.Millisecond:
		return usagef("--window %v: must be at least 1ms", window)
	case c.Duration("timeout") <= 0:
		return usagef("--timeout %v: must be positive", c.Duration("timeout"))
	case c.IsSet("timeout") && !c.Bool("wait"):
		return usagef("--timeout needs --wait")
	case c.Int("partition") < 0:
		return usagef("--partition %d: must be from 0 to the number of partitions - 1", c.Int("partition"))
	}
	store, err := openStore(c)
	if err != nil {
		return err
	}
	defer store.Close()

	ctx, cancel := context.WithTimeout(c.Context, 10*time.Second)
	key, err := partitionKeyOf(ctx, c, store, name, "move")
	if err != nil {
		cancel()
		return err
	}
	if to == "" && key == name {
		err := refuseWithoutSuccessor(ctx, store, name)
		switch {
		case err != nil && c.Bool("force") && !errors.Is(err, errStepDownRefused):
			// --force steps down whatever the candidates are.
		case err != nil && c.Bool("force"):
			fmt.Fprintf(c.App.ErrWriter, "%s: --force: no other replica is campaigning for it; its command stops and nobody leads it for %s, after which its leader may take it back\n",
				name, window)
		case err != nil:
			cancel()
			return err
		}
	}
	rec, err := store.RequestStepDown(ctx, key, to, window)
	cancel()
	if err != nil {
		return stepDownError(store, key, to, err)
	}
	name = key
	w := c.App.Writer
	if to != "" {
		fmt.Fprintf(w, "%s: asked %s (token %d) to step down; only %s may take over for %s\n",
			name, observe.Shown(rec.Holder), rec.Token, observe.Shown(to), window)
	} else {
		fmt.Fprintf(w, "%s: asked %s (token %d) to step down; it may not take the name back for %s\n",
			name, observe.Shown(rec.Holder), rec.Token, window)
	}
	if !c.Bool("wait") {
		return nil
	}

	ctx, stop := untilStopSignal(c.Context, sigs)
	defer stop()
	ctx, cancelTimeout := context.WithTimeoutCause(ctx, c.Duration("timeout"),
		fmt.Errorf("%w (%v)", errNoNewLeader, c.Duration("timeout")))
	defer cancelTimeout()
	start := time.Now()
	next, err := awaitNewLeader(ctx, c.App.ErrWriter, store, rec)
	if err != nil {
		return fmt.Errorf("step-down of %q: %w", name, err)
	}
	fmt.Fprintf(w, "%s: new leader %s (token %d) after %s\n",
		name, observe.Shown(next.Holder), next.Token, time.Since(start).Round(time.Millisecond))
	if to != "" && next.Holder != to {
		return fmt.Errorf("step-down of %q: %s took the name, not %s: %w", name, observe.Shown(next.Holder), to, errStepDownRefused)
	}
	return nil
}

// partitionKeyOf is the lease an operator command about name acts on
// (verb says what it does to a partition: "move", "forget"): name itself,
// or with --partition, that partition of name, which must have been run
// with --partitions.
func partitionKeyOf(ctx context.Context, c *cli.Context, store lease.Store, name, verb string) (string, error) {
	g, err := store.GetGroup(ctx, name)
	switch {
	case errors.Is(err, lease.ErrNotFound):
		if !c.IsSet("partition") {
			return name, nil
		}
		if _, err := store.Get(ctx, name); errors.Is(err, lease.ErrNotFound) {
			return "", fmt.Errorf("%q in %s was never run with --partitions, nor without: %w", name, store.Describe(), errNoSuchLease)
		}
		return "", usagef("--partition %d: %q in %s was never run with --partitions; leave --partition out",
			c.Int("partition"), name, store.Describe())
	case err != nil:
		return "", fmt.Errorf("read the partitions of %q: %w", name, err)
	case !c.IsSet("partition"):
		return "", usagef("%q runs with --partitions %d: give the partition to %s with --partition P", name, g.Partitions, verb)
	case c.Int("partition") >= g.Partitions:
		return "", usagef("--partition %d: %q has %d partitions, 0 to %d", c.Int("partition"), name, g.Partitions, g.Partitions-1)
	}
	return lease.PartitionKey(name, c.Int("partition")), nil
}

// refuseWithoutSuccessor refuses to step down the leader of name when no
// other replica is campaigning for it (lease.Campaigner.Candidates: a
// replica that tried to take the name within twice its TTL and did not
// stop cleanly since): the command would only stop, with nobody to take
// over for --window.
func refuseWithoutSuccessor(ctx context.Context, store lease.Store, name string) error {
	rec, err := store.Get(ctx, name)
	if err != nil || !rec.Held() {
		return nil // RequestStepDown says what is wrong
	}
	list, err := store.Candidates(ctx, name)
	if err != nil {
		return fmt.Errorf("lease %q: cannot tell whether another replica campaigns for it: %w", name, err)
	}
	if len(lease.Others(list, rec.Holder)) > 0 {
		return nil
	}
	return fmt.Errorf("lease %q: no other replica is campaigning for it, so its command would stop with no successor for --window; --force steps down anyway: %w",
		name, errStepDownRefused)
}

// stepDownError explains a refused request; nothing was changed.
func stepDownError(store lease.Store, name, to string, err error) error {
	switch {
	case errors.Is(err, lease.ErrNotFound):
		return fmt.Errorf("lease %q in %s: %w", name, store.Describe(), errNoSuchLease)
	case errors.Is(err, lease.ErrNotHeld):
		return fmt.Errorf("lease %q: nobody holds it (released or expired), so there is nothing to step down: %w",
			name, errStepDownRefused)
	case errors.Is(err, lease.ErrAlreadyLeader):
		return fmt.Errorf("lease %q: %s is already the leader: %w", name, to, errStepDownRefused)
	case errors.Is(err, lease.ErrUnknownSuccessor):
		return fmt.Errorf("lease %q: no replica with identity %q is campaigning for it (or, for a partition, is a live member of its group): %w", name, to, errStepDownRefused)
	}
	return fmt.Errorf("step down lease %q: %w", name, err)
}

// A hand-over asked for is usually done within tens of milliseconds, but
// not every store's Wait sees it that soon: MySQL polls a released name
// every 250 ms, and PostgreSQL's first Wait opens the LISTEN connection, a
// server backend's start, which often outlasts the hand-over itself
// (BENCHMARKS.md has the step-down figures). So for its first
// handOverPollFor the step-down command only reads the name, every
// handOverPoll (at most 100 reads); a replica's Waits are left alone.
const (
	handOverPoll    = 5 * time.Millisecond
	handOverPollFor = 500 * time.Millisecond
)

// awaitNewLeader returns the first record held under a newer token than
// old's by another holder. A newer tenure of old's own holder is an error:
// no other replica took the name within the window.
func awaitNewLeader(ctx context.Context, log io.Writer, store lease.Store, old lease.Record) (lease.Record, error) {
	backoff := 250 * time.Millisecond
	seen := old
	pollUntil := time.Now().Add(handOverPollFor)
	for {
		rec, err := store.Get(ctx, old.Name)
		wait := time.Minute
		switch {
		case ctx.Err() != nil:
			return lease.Record{}, context.Cause(ctx)
		case err == nil && rec.Held() && rec.Token > old.Token && rec.Holder == old.Holder:
			return rec, fmt.Errorf("%s took the name back (token %d): no other replica took it within the window: %w",
				observe.Shown(rec.Holder), rec.Token, errStepDownRefused)
		case err == nil && rec.Held() && rec.Token > old.Token:
			return rec, nil
		case err != nil && !errors.Is(err, lease.ErrNotFound):
			retryLine(log, "step-down --wait", err, backoff)
			wait, backoff = backoff, min(2*backoff, 5*time.Second)
		case time.Now().Before(pollUntil):
			t := time.NewTimer(handOverPoll)
			select {
			case <-ctx.Done():
				t.Stop()
				return lease.Record{}, context.Cause(ctx)
			case <-t.C:
			}
			continue
		default:
			seen = rec // the zero Record when the name is gone
		}
		if err := store.Wait(ctx, old.Name, seen, wait); err != nil {
			return lease.Record{}, context.Cause(ctx)
		}
	}
}
