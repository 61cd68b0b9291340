package cmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/leaderrun/leaderrun/config"
	"github.com/leaderrun/leaderrun/lease"
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
		Description: `Events: elected (a new holder and token), step-down (an operator asked the
holder to hand over; with the successor when one was named), released,
expired and, for a name that does not exist yet, absent. Runs until SIGINT
or SIGTERM.`,
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
			w := &eventWriter{w: c.App.Writer, json: c.Bool("json")}
			err = watch(ctx, store, name, w)
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		},
	}
}

// watch emits an event whenever name's state changes, until ctx ends.
func watch(ctx context.Context, store lease.Store, name string, w *eventWriter) error {
	var (
		last    = "" // last event emitted, with its holder and token
		backoff = 250 * time.Millisecond
		seen    lease.Record // what the last successful read found
	)
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
			fmt.Fprintf(os.Stderr, "leaderrun: watch %q: %v (retrying in %v)\n", name, err, backoff)
			wait, backoff = backoff, min(2*backoff, watchPoll)
		default:
			backoff, seen = 250*time.Millisecond, rec
			event := map[string]string{"held": "elected", "released": "released", "expired": "expired"}[rec.State()]
			if rec.Held() && rec.StepDown {
				event = "step-down"
			}
			last = w.emit(last, event, rec)
			if rec.Held() {
				// Wake just after the expiry, should renewals stop.
				wait = min(wait, rec.Remaining+10*time.Millisecond)
			}
		}
		if err := store.Wait(ctx, name, seen, wait); err != nil {
			return err
		}
	}
}

// eventWriter prints watch events as text or JSON lines.
type eventWriter struct {
	w    io.Writer
	json bool
}

type eventJSON struct {
	Time   time.Time `json:"time"`
	Event  string    `json:"event"`
	Name   string    `json:"name"`
	Holder string    `json:"holder,omitempty"`
	Token  int64     `json:"token,omitempty"`
	// Successor is the identity a step-down reserved the name for.
	Successor string `json:"successor,omitempty"`
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
	ev := eventJSON{Time: time.Now().UTC().Round(time.Millisecond), Event: event, Name: rec.Name,
		Holder: rec.Holder, Token: rec.Token, Successor: successor}
	if e.json {
		json.NewEncoder(e.w).Encode(ev)
		return key
	}
	line := fmt.Sprintf("%s %-8s name=%s", ev.Time.Format("2006-01-02T15:04:05.000Z07:00"), event, shown(rec.Name))
	if rec.Holder != "" {
		line += fmt.Sprintf(" holder=%s token=%d", shown(rec.Holder), rec.Token)
	}
	if successor != "" {
		line += " successor=" + shown(successor)
	}
	fmt.Fprintln(e.w, line)
	return key
}

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
