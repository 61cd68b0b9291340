package cmd

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leaderrun/leaderrun/config"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/observe"
)

// errForgetRefused marks a forget the store refused because the name is
// held: exit 1.
var errForgetRefused = errors.New("forget refused")

// A name's last token may be ahead of the store's clock by the few
// milliseconds of a burst of grants (lease.ErrTokenAhead): forget tries
// again every tokenAheadRetry, for tokenAheadFor.
const (
	tokenAheadRetry = 20 * time.Millisecond
	tokenAheadFor   = 2 * time.Second
)

func forgetCommand() *cli.Command {
	return &cli.Command{
		Name:      "forget",
		Usage:     "delete a name that nobody holds from the store, with its candidates",
		UsageText: "leaderrun forget [--partition P] [--store DSN] NAME",
		Description: `Deletes NAME's record and the candidates the store keeps for it, so that
status lists it no more. Only a name that nobody holds is forgotten:
released, or expired. A held name is never forgotten: stop its replicas
first (a step-down alone does not free it). A replica that campaigns for
NAME later creates it afresh, and its token still exceeds every token NAME
had, as tokens follow the store's clock: fencing by token stays safe.

For a name run with --partitions, --partition P forgets partition P, as
does NAME given as status lists it ("NAME #P"); the group's members expire
on their own.

Exit status: 0 forgotten; 1 NAME is held (its holder and how long its lease
runs are named), its last token is still ahead of the store's clock, the
store could not be reached, or another failure; 4 no such name; 125 bad
options, or a store that refused leaderrun (a wrong password, a missing
privilege, a DSN it cannot use).`,
		Flags: append(storeFlags(),
			&cli.StringFlag{Name: "name", EnvVars: env("name"), Usage: "the name to forget (required; or give it as the argument)"},
			&cli.IntFlag{Name: "partition", DefaultText: "none; required for a name run with --partitions", Usage: "with a name run with --partitions: the partition to forget (0 to N-1)"},
		),
		Action: runForget,
	}
}

func runForget(c *cli.Context) error {
	name, err := nameArg(c)
	if err != nil {
		return err
	}
	// A partition as status lists it ("ingest #3") is a name too.
	group, _, isPartition := lease.SplitPartitionKey(name)
	if !isPartition {
		group = name
	}
	if err := config.ValidateName(group); err != nil {
		return err
	}
	if isPartition && c.IsSet("partition") {
		return usagef("%q names a partition already: leave --partition out", name)
	}
	if c.Int("partition") < 0 {
		return usagef("--partition %d: must be from 0 to the number of partitions - 1", c.Int("partition"))
	}
	store, err := openStore(c)
	if err != nil {
		return err
	}
	defer store.Close()
	ctx, cancel := context.WithTimeout(c.Context, 10*time.Second)
	defer cancel()

	key := name
	if !isPartition {
		if key, err = partitionKeyOf(ctx, c, store, name, "forget"); err != nil {
			return err
		}
	}
	err = forget(ctx, store, key)
	var held *lease.HeldError
	switch {
	case err == nil:
		fmt.Fprintf(c.App.Writer, "%s: forgotten (its record and candidates deleted)\n", observe.Shown(key))
		return nil
	case errors.As(err, &held):
		r := held.Record
		return fmt.Errorf("lease %q is held by %s (token %d), whose lease runs %s more unless renewed; a held name is never forgotten: %w",
			key, observe.Shown(r.Holder), r.Token, observe.TimeLeft(r), errForgetRefused)
	case errors.Is(err, lease.ErrNotFound):
		return fmt.Errorf("lease %q in %s: %w", key, store.Describe(), errNoSuchLease)
	}
	return fmt.Errorf("forget lease %q: %w", key, err)
}

// forget forgets key, trying again while its last token is ahead of the
// store's clock, for tokenAheadFor at most.
func forget(ctx context.Context, cr lease.Campaigner, key string) error {
	deadline := time.Now().Add(tokenAheadFor)
	for {
		err := cr.Forget(ctx, key)
		if !errors.Is(err, lease.ErrTokenAhead) || time.Now().After(deadline) {
			return err
		}
		t := time.NewTimer(tokenAheadRetry)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
	}
}
