package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/urfave/cli/v2"

	"github.com/leaderrun/leaderrun/config"
	"github.com/leaderrun/leaderrun/internal/environ"
	"github.com/leaderrun/leaderrun/lease"
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
		dsn, _ = defaultStore()
	}
	if err := environ.Hide(); err != nil {
		warnLine(c.App.ErrWriter, "cannot make this process non-dumpable; other processes of its user can read its memory: "+err.Error())
	}
	s, err := lease.OpenWith(c.Context, dsn, lease.OpenOptions{Existing: true})
	if err != nil && byDefault {
		return nil, fmt.Errorf("open store: %w", defaultStoreError(err))
	}
	if err != nil {
		return nil, fmt.Errorf("open store: %w", err)
	}
	if err := scrubCredentials(s); err != nil {
		warnLine(c.App.ErrWriter, "cannot blank the store's credentials in /proc/self/environ: "+err.Error())
	}
	return s, nil
}

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show holder, token and expiry of one name or every name",
		UsageText: "leaderrun status [--json] [--store DSN] [NAME]",
		Description: `Without --name, lists every name in the store (a partition of NAME as
"NAME #P", which status also takes as NAME). State is held, released or
expired. For a name run with --partitions, shows the number of partitions,
the live members (how many partitions each holds) and every partition's
holder, token and expiry. The store keeps every name it has seen; to forget
one, delete its row or key in the store (see the store's section of the
README).

Exit status: 0 shown; 1 the store could not be read (unreachable, refused);
4 NAME is a lease the store has never seen; 125 usage.`,
		Flags: append(storeFlags(),
			&cli.StringFlag{Name: "name", EnvVars: env("name"), Usage: "show only this name (or give it as the argument)"},
			&cli.BoolFlag{Name: "json", Usage: "print JSON: an object for --name, else an array"},
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

	w := c.App.Writer
	if c.Bool("json") {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if name != "" {
			return enc.Encode(jsonRecord(recs[0]))
		}
		out := make([]recordJSON, 0, len(recs))
		for _, r := range recs {
			out = append(out, jsonRecord(r))
		}
		return enc.Encode(out)
	}
	if len(recs) == 0 {
		fmt.Fprintf(c.App.ErrWriter, "leaderrun: no leases in %s yet: a name appears once a replica campaigns for it\n", store.Describe())
	}
	return printTable(w, recs)
}

// recordJSON is the stable JSON shape of a lease for scripts.
type recordJSON struct {
	Name     string     `json:"name"`
	State    string     `json:"state"` // held, released or expired
	Holder   string     `json:"holder"`
	Token    int64      `json:"token"`
	Acquired *time.Time `json:"acquired"`
	Renewed  *time.Time `json:"renewed"`
	Expires  *time.Time `json:"expires"`
	// ExpiresIn is the time left in seconds as the store measured it; 0
	// once released or expired.
	ExpiresIn float64 `json:"expires_in_seconds"`
}

func jsonRecord(r lease.Record) recordJSON {
	return recordJSON{
		Name: r.Name, State: r.State(), Holder: r.Holder, Token: r.Token,
		Acquired: optTime(r.Acquired), Renewed: optTime(r.Renewed), Expires: optTime(r.Expires),
		ExpiresIn: seconds(timeLeft(r)),
	}
}

// groupJSON is the stable JSON shape of a name run with --partitions.
type groupJSON struct {
	Name       string          `json:"name"`
	Partitions int             `json:"partitions"`
	Members    []memberJSON    `json:"members"`
	Leases     []partitionJSON `json:"leases"` // one per partition, in order
}

type memberJSON struct {
	Identity  string  `json:"identity"`
	Owns      int     `json:"owns"` // partitions it holds
	ExpiresIn float64 `json:"expires_in_seconds"`
}

type partitionJSON struct {
	Partition int `json:"partition"`
	recordJSON
}

func jsonGroup(g lease.Group) groupJSON {
	out := groupJSON{Name: g.Name, Partitions: g.Partitions, Members: []memberJSON{}, Leases: []partitionJSON{}}
	owns := map[string]int{}
	for p, r := range g.Leases {
		if r.Name == "" {
			r.Name = lease.PartitionKey(g.Name, p)
		}
		out.Leases = append(out.Leases, partitionJSON{Partition: p, recordJSON: jsonRecord(r)})
		if r.Held() {
			owns[r.Holder]++
		}
	}
	for _, m := range g.Members {
		out.Members = append(out.Members, memberJSON{Identity: m.Identity, Owns: owns[m.Identity],
			ExpiresIn: seconds(m.Remaining)})
	}
	return out
}

// printGroup prints a partitioned name: its members, then its partitions.
func printGroup(c *cli.Context, g lease.Group) error {
	w := c.App.Writer
	gj := jsonGroup(g)
	if c.Bool("json") {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(gj)
	}
	members := "live members"
	if len(g.Members) == 1 {
		members = "live member"
	}
	fmt.Fprintf(w, "%s: %d partitions, %d %s\n\n", shown(g.Name), g.Partitions, len(g.Members), members)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "MEMBER\tOWNS\tEXPIRES IN")
	for _, m := range gj.Members {
		fmt.Fprintf(tw, "%s\t%d\t%s\n", shown(m.Identity), m.Owns, time.Duration(m.ExpiresIn*float64(time.Second)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tSTATE\tHOLDER\tTOKEN\tACQUIRED\tRENEWED\tEXPIRES IN")
	for p, r := range g.Leases {
		state, holder, left := r.State(), shown(r.Holder), "-"
		if !r.Exists() {
			state, holder = "free", "-"
		}
		if r.Held() {
			left = timeLeft(r).String()
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%d\t%s\t%s\t%s\n", p, state, holder, r.Token,
			fmtTime(r.Acquired), fmtTime(r.Renewed), left)
	}
	return tw.Flush()
}

func timeLeft(r lease.Record) time.Duration {
	if !r.Held() {
		return 0
	}
	return r.Remaining.Round(time.Millisecond)
}

// seconds is d in seconds to the millisecond, as JSON shows it: 13.399,
// never 13.399000000000001.
func seconds(d time.Duration) float64 {
	return float64(d.Round(time.Millisecond).Milliseconds()) / 1000
}

func optTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC().Round(time.Millisecond)
	return &t
}

func printTable(w io.Writer, recs []lease.Record) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tSTATE\tHOLDER\tTOKEN\tACQUIRED\tRENEWED\tEXPIRES IN")
	for _, r := range recs {
		left := "-"
		if r.Held() {
			left = timeLeft(r).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", shown(r.Name), r.State(), shown(r.Holder), r.Token,
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

// shown is s as an operator command prints it in text: as it is when it is
// printable UTF-8 without spaces, else quoted, so that what a store holds
// (a tampered record, say) can neither forge a line nor move the terminal.
func shown(s string) string {
	if utf8.ValidString(s) && strings.IndexFunc(s, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) < 0 {
		return s
	}
	return strconv.Quote(s)
}
