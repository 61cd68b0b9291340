package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leaderrun/leaderrun/config"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/observe"
	"github.com/leaderrun/leaderrun/signals"
)

// watchPoll bounds how long watch trusts that nothing changed without
// looking: stores wake it on changes of hands, this catches the rest.
const watchPoll = 5 * time.Second

func watchCommand(sigs <-chan os.Signal) *cli.Command {
	return &cli.Command{
		Name:      "watch",
		Usage:     "print a line for every change of a name's leadership, as it happens",
		UsageText: "leaderrun watch [--json] [--store DSN] NAME",
		Description: `Events: leader (the holder the first read finds, and since when it holds
the name), elected (a new holder and token), step-down (an operator asked the
holder to hand over; with the successor when one was named), released,
expired and, for a name that does not exist yet, absent; unhealthy when a
replica becomes ineligible (its command's health check failed: it handed
the name over), with until when and the check's last output, escaped. A
holder's priority shows when it is not 0. For a name run
with --partitions, the same events for each partition (name "NAME #P"), and
joined and left (or expired) for its members. Runs until SIGINT or SIGTERM.

Exit status: 0 stopped by SIGINT or SIGTERM; 1 the store could not be
reached; 4 no store there; 141 its reader left (a closed pipe); 125 bad
options, or a store that refused leaderrun (a wrong password, a missing
privilege, a DSN it cannot use).`,
		Flags: append(storeFlags(),
			&cli.StringFlag{Name: "name", EnvVars: env("name"), Usage: "the name to watch (required; or give it as the argument)"},
			&cli.BoolFlag{Name: "json", Usage: "print one JSON object per line"},
		),
		Action: func(c *cli.Context) error {
			name, err := nameArg(c)
			if err != nil {
				return err
			}
			if err := config.ValidateName(name); err != nil {
				return err
			}
			store, err := openStore(c)
			if err != nil {
				return err
			}
			defer store.Close()
			ctx, stop := untilStopSignal(c.Context, sigs)
			defer stop()
			ctx, gone := untilReaderGone(ctx, c.App.Writer)
			defer gone()
			w := &eventWriter{w: c.App.Writer, log: c.App.ErrWriter, json: c.Bool("json")}
			err = watch(ctx, store, name, w)
			if cause := context.Cause(ctx); errors.Is(cause, errReaderGone) {
				return cause
			}
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		},
	}
}

// watch emits an event whenever name's state changes, until ctx ends.
func watch(ctx context.Context, store lease.Store, name string, w *eventWriter) error {
	if _, err := store.GetGroup(ctx, name); err == nil {
		return watchGroup(ctx, store, name, w)
	}
	var (
		last    = "" // last event emitted, with its holder and token
		backoff = 250 * time.Millisecond
		seen    lease.Record // what the last successful read found
		cands   candidateWatch
	)
	w.priority = cands.priority
	for {
		rec, err := store.Get(ctx, name)
		wait := watchPoll
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, lease.ErrNotFound):
			seen = lease.Record{}
			last = w.emit(last, "absent", lease.Record{Name: name})
		case err != nil:
			retryLine(w.log, fmt.Sprintf("watch %q", name), err, backoff)
			wait, backoff = backoff, min(2*backoff, watchPoll)
		default:
			backoff, seen = 250*time.Millisecond, rec
			cands.read(ctx, store, name)
			last = w.emit(last, eventOf(rec), rec)
			cands.emitIneligible(w, name)
			if rec.Held() {
				// Wake just after the expiry, should renewals stop.
				wait = min(wait, rec.Remaining+10*time.Millisecond)
			}
		}
		if w.err != nil {
			return w.err
		}
		if err := store.Wait(ctx, name, seen, wait); err != nil {
			return err
		}
	}
}

// eventOf is the watch event that rec's state is.
func eventOf(rec lease.Record) string {
	if rec.Held() && rec.StepDown {
		return "step-down"
	}
	return map[string]string{"held": "elected", "released": "released", "expired": "expired"}[rec.State()]
}

// watchGroup emits an event whenever a member of group joins or leaves
// and whenever one of its partitions changes state, until ctx ends.
func watchGroup(ctx context.Context, store lease.Store, group string, w *eventWriter) error {
	var (
		last    = map[int]string{} // last event emitted per partition
		members = map[string]bool{}
		backoff = 250 * time.Millisecond
		seen    lease.Group
		changed lease.Group // what the last WaitGroup read, if it did
	)
	for {
		g, err := changed, error(nil)
		if g.Name == "" {
			g, err = store.GetGroup(ctx, group)
		}
		wait := watchPoll
		switch {
		case ctx.Err() != nil:
			return ctx.Err()
		case err != nil:
			retryLine(w.log, fmt.Sprintf("watch %q", group), err, backoff)
			wait, backoff = backoff, min(2*backoff, watchPoll)
		default:
			backoff, seen = 250*time.Millisecond, g
			live := map[string]bool{}
			for _, m := range g.Members {
				live[m.Identity] = true
				if !members[m.Identity] {
					w.emitMember("joined", group, m.Identity)
				}
				wait = min(wait, m.Remaining+10*time.Millisecond) // see it expire
			}
			for _, id := range slices.Sorted(maps.Keys(members)) {
				if !live[id] {
					w.emitMember("left", group, id)
				}
			}
			members = live
			for p, rec := range g.Leases {
				if !rec.Exists() {
					continue
				}
				last[p] = w.emit(last[p], eventOf(rec), rec)
				if rec.Held() {
					wait = min(wait, rec.Remaining+10*time.Millisecond)
				}
			}
		}
		if w.err != nil {
			return w.err
		}
		if changed, err = store.WaitGroup(ctx, group, seen, wait); err != nil {
			return err
		}
	}
}

// eventWriter prints watch events as text or JSON lines. Its first write
// error ends the watch (the reader of a pipe has gone: watch | head).
type eventWriter struct {
	w    io.Writer
	log  io.Writer // where failed reads are reported
	json bool
	err  error // the first write error
	// priority, when set, is a holder's priority (its candidacy), shown
	// with the events of one name when not 0.
	priority func(holder string) int32
}

func (e *eventWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

type eventJSON struct {
	Time   time.Time `json:"time"`
	Event  string    `json:"event"`
	Name   string    `json:"name"`
	Holder string    `json:"holder,omitempty"`
	Token  int64     `json:"token,omitempty"`
	// Successor is the identity a step-down reserved the name for.
	Successor string `json:"successor,omitempty"`
	// Partition is set for the events of a partition, Member for those
	// of a member of a name run with --partitions.
	Partition *int   `json:"partition,omitempty"`
	Member    string `json:"member,omitempty"`
	// Since is when the tenure began, for a "leader" event: the tenure
	// the watch found when it started.
	Since *time.Time `json:"since,omitempty"`
	// Priority is the holder's priority, when not 0.
	Priority int32 `json:"priority,omitempty"`
	// Until and Note are an "unhealthy" event's: when the candidate
	// becomes eligible again, and why it is not (the health check's last
	// output, bounded and escaped by the replica).
	Until *time.Time `json:"until,omitempty"`
	Note  string     `json:"note,omitempty"`
}

// emit prints event for rec unless it repeats last; it returns the key of
// what it printed (or last).
func (e *eventWriter) emit(last, event string, rec lease.Record) string {
	var successor string
	if event == "step-down" {
		successor = rec.Successor
	}
	key := fmt.Sprintf("%s %s %d %s", event, rec.Holder, rec.Token, successor)
	if key == last {
		return last
	}
	ev := eventJSON{Time: now(), Event: event, Name: rec.Name,
		Holder: rec.Holder, Token: rec.Token, Successor: successor}
	if last == "" && event == "elected" {
		// The first read finds a tenure that began before the watch:
		// it is not news of an election now.
		since := rec.Acquired.UTC().Round(time.Millisecond)
		ev.Event, ev.Since = "leader", &since
	}
	if _, p, ok := lease.SplitPartitionKey(rec.Name); ok {
		ev.Partition = &p
	}
	if e.priority != nil && rec.Holder != "" {
		ev.Priority = e.priority(rec.Holder)
	}
	if e.json {
		json.NewEncoder(e).Encode(ev)
		return key
	}
	line := fmt.Sprintf("%s %-8s name=%s", ev.Time.Format(eventTime), ev.Event, observe.Shown(rec.Name))
	if rec.Holder != "" {
		line += fmt.Sprintf(" holder=%s token=%d", observe.Shown(rec.Holder), rec.Token)
	}
	if ev.Since != nil {
		line += " since=" + ev.Since.Format(eventTime)
	}
	if successor != "" {
		line += " successor=" + observe.Shown(successor)
	}
	if ev.Priority != 0 {
		line += fmt.Sprintf(" priority=%d", ev.Priority)
	}
	fmt.Fprintln(e, line)
	return key
}

// emitMember prints a member event of group.
func (e *eventWriter) emitMember(event, group, member string) {
	ev := eventJSON{Time: now(), Event: event, Name: group, Member: member}
	if e.json {
		json.NewEncoder(e).Encode(ev)
		return
	}
	fmt.Fprintf(e, "%s %-8s name=%s member=%s\n", ev.Time.Format(eventTime), event, observe.Shown(group), observe.Shown(member))
}

// eventTime is the layout of an event's time: fixed width, so that lines
// align.
const eventTime = "2006-01-02T15:04:05.000Z07:00"

func now() time.Time { return time.Now().UTC().Round(time.Millisecond) }

// untilStopSignal returns a context that ends, with the cause "interrupted
// by SIGNAL", when a stop signal arrives on sigs: an operator command's
// way to end cleanly on Ctrl-C. Its goroutine ends with the context; call
// stop when done.
func untilStopSignal(parent context.Context, sigs <-chan os.Signal) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case s := <-sigs:
				if signals.IsStop(s) {
					cancel(fmt.Errorf("interrupted by %v", s))
					return
				}
			}
		}
	}()
	return ctx, func() { cancel(nil) }
}
