package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leaderrun/leaderrun/config"
	"github.com/leaderrun/leaderrun/internal/environ"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/observe"
	"github.com/leaderrun/leaderrun/replica"
)

// ExitNoSuchLease is status's exit code for a name the store has never
// seen (as systemctl's 4 for an unknown unit).
const ExitNoSuchLease = 4

// errNoSuchLease marks an operator command about a name the store never saw.
var errNoSuchLease = errors.New("no such lease")

// storeFlags are the options every command that reads the store takes.
func storeFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "store", EnvVars: env("store"), Usage: "store DSN (default: " + defaultStoreText + ")"},
		&cli.StringFlag{Name: "store-file", EnvVars: env("store-file"), TakesFile: true, Usage: "read the store DSN from the first line of this file"},
	}
}

// openStore opens the store the options name, for an operator command: one
// that exists already (a mistyped path creates nothing and says so).
func openStore(c *cli.Context) (lease.Store, error) {
	dsn, err := storeDSN(c)
	if err != nil {
		return nil, err
	}
	byDefault := dsn == ""
	if byDefault {
		dsn, _ = replica.DefaultStore()
	}
	if err := environ.Hide(); err != nil {
		warnLine(c.App.ErrWriter, "cannot make this process non-dumpable; other processes of its user can read its memory: "+err.Error())
	}
	s, err := lease.OpenWith(c.Context, dsn, lease.OpenOptions{Existing: true})
	if err != nil && byDefault {
		return nil, fmt.Errorf("open store: %w", replica.DefaultStoreError(err))
	}
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := replica.ScrubCredentials(s); err != nil {
		warnLine(c.App.ErrWriter, "cannot blank the store's credentials in /proc/self/environ: "+err.Error())
	}
	return s, nil
}

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show holder, token and expiry of one name or every name",
		UsageText: "leaderrun status [--json] [--hide-idle-for DURATION] [--store DSN] [NAME]",
		Description: `Without --name, lists every name in the store (a partition of NAME as
"NAME #P", which status also takes as NAME). State is held, released or
expired. For a name run with --partitions, shows the number of partitions,
the live members (how many partitions each holds) and every partition's
holder, token and expiry. The store keeps every name it has seen until
"leaderrun forget NAME" deletes it.

--hide-idle-for DURATION leaves out of the list the names nobody has held
for at least DURATION: released or expired, their last lease's expiry
(the last renewal plus the TTL; a released name was released before then)
at least DURATION ago by the store's clock. A store that does not keep the
expiry of a name nobody holds (etcd) hides none.

Exit status: 0 shown; 1 the store could not be reached; 4 NAME is a lease
the store has never seen (or, without NAME, there is no store there); 125
bad options, or a store that refused leaderrun (a wrong password, a missing
privilege, a DSN it cannot use).`,
		Flags: append(storeFlags(),
			&cli.StringFlag{Name: "name", EnvVars: env("name"), Usage: "show only this name (or give it as the argument)"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON: an object for --name, else an array"},
			&cli.DurationFlag{Name: "hide-idle-for", DefaultText: "0s, show every name", Usage: "list no name whose last lease expired at least this long ago (released or expired)"},
		),
		Action: runStatus,
	}
}

func runStatus(c *cli.Context) error {
	name, err := nameArg(c)
	if err != nil {
		return err
	}
	if name != "" {
		// A partition as the list shows it ("ingest #3") is a name too.
		group, _, isPartition := lease.SplitPartitionKey(name)
		if !isPartition {
			group = name
		}
		if err := config.ValidateName(group); err != nil {
			return err
		}
	}
	idle := c.Duration("hide-idle-for")
	switch {
	case idle < 0:
		return usagef("--hide-idle-for %v: must be 0 (show every name) or positive", idle)
	case c.IsSet("hide-idle-for") && name != "":
		return usagef("--hide-idle-for filters the list of every name: leave out NAME, or --hide-idle-for")
	}
	store, err := openStore(c)
	if err != nil {
		return err
	}
	defer store.Close()
	ctx, cancel := context.WithTimeout(c.Context, 10*time.Second)
	defer cancel()

	var recs []lease.Record
	if name != "" {
		rec, err := store.Get(ctx, name)
		if errors.Is(err, lease.ErrNotFound) {
			g, gerr := store.GetGroup(ctx, name)
			switch {
			case gerr == nil:
				return printGroup(c, g)
			case !errors.Is(gerr, lease.ErrNotFound):
				return fmt.Errorf("read the partitions of %q: %w", name, gerr)
			}
			return fmt.Errorf("lease %q in %s: %w", name, store.Describe(), errNoSuchLease)
		}
		if err != nil {
			return fmt.Errorf("read lease %q: %w", name, err)
		}
		recs = []lease.Record{rec}
	} else if recs, err = store.List(ctx); err != nil {
		return fmt.Errorf("list leases: %w", err)
	}
	all := len(recs)
	if idle > 0 {
		recs = slices.DeleteFunc(recs, func(r lease.Record) bool { return idleFor(r) >= idle })
		if hidden := all - len(recs); hidden > 0 {
			fmt.Fprintf(c.App.ErrWriter, "leaderrun: %d of %d names not shown: nobody has held them for %v or longer\n", hidden, all, idle)
		}
	}

	w := c.App.Writer
	if c.Bool("json") {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if name != "" {
			return enc.Encode(observe.ViewRecord(recs[0]))
		}
		out := make([]observe.RecordView, 0, len(recs))
		for _, r := range recs {
			out = append(out, observe.ViewRecord(r))
		}
		return enc.Encode(out)
	}
	if all == 0 {
		fmt.Fprintf(c.App.ErrWriter, "leaderrun: no leases in %s yet: a name appears once a replica campaigns for it\n", store.Describe())
	}
	return printTable(w, recs)
}

// idleFor is how long nobody has held r's name, at least: the time since
// its last lease expired, by the store's clock (a released lease was
// released before its expiry); zero while it is held, or when the store
// does not say (etcd's Remaining for a name nobody holds).
func idleFor(r lease.Record) time.Duration {
	if r.Held() {
		return 0
	}
	return max(-r.Remaining, 0)
}

// printGroup prints a partitioned name: its members, then its partitions.
func printGroup(c *cli.Context, g lease.Group) error {
	w := c.App.Writer
	gj := observe.ViewGroup(g)
	if c.Bool("json") {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(gj)
	}
	members := "live members"
	if len(g.Members) == 1 {
		members = "live member"
	}
	fmt.Fprintf(w, "%s: %d partitions, %d %s\n\n", observe.Shown(g.Name), g.Partitions, len(g.Members), members)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tOWNS\tEXPIRES IN")
	for _, m := range gj.Members {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", observe.Shown(m.Identity), m.Owns, time.Duration(m.ExpiresIn*float64(time.Second)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tSTATE\tHOLDER\tTOKEN\tACQUIRED\tRENEWED\tEXPIRES IN")
	for p, r := range g.Leases {
		state, holder, left := r.State(), observe.Shown(r.Holder), "-"
		if !r.Exists() {
			state, holder = "free", "-"
		}
		if r.Held() {
			left = observe.TimeLeft(r).String()
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\n", p, state, holder, r.Token,
			fmtTime(r.Acquired), fmtTime(r.Renewed), left)
	}
	return tw.Flush()
}

func printTable(w io.Writer, recs []lease.Record) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tHOLDER\tTOKEN\tACQUIRED\tRENEWED\tEXPIRES IN")
	for _, r := range recs {
		left := "-"
		if r.Held() {
			left = observe.TimeLeft(r).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", observe.Shown(r.Name), r.State(), observe.Shown(r.Holder), r.Token,
			fmtTime(r.Acquired), fmtTime(r.Renewed), left)
	}
	return tw.Flush()
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Round(time.Millisecond).Format("2006-01-02T15:04:05.000Z")
}
