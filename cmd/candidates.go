package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/observe"
)

// A name's candidates, as status and watch show them (DESIGN §13): each
// live replica campaigning for it with its priority, whether it preempts,
// and whether it is eligible, or until when it is not and why (a leader
// that handed the name over because its command was unhealthy).

// candidateView is a candidate in status's JSON.
type candidateView struct {
	Holder   string `json:"holder"`
	Priority int32  `json:"priority"`
	Preempt  bool   `json:"preempt"`
	Eligible bool   `json:"eligible"`
	// IneligibleUntil is when an ineligible candidate becomes eligible,
	// by this host's clock; Note says why it is not.
	IneligibleUntil *time.Time `json:"ineligible_until,omitempty"`
	Note            string     `json:"note,omitempty"`
}

// recordWithCandidates is status's JSON for one name.
type recordWithCandidates struct {
	observe.RecordView
	Candidates []candidateView `json:"candidates"`
}

// candidatesOf reads name's live candidates.
func candidatesOf(ctx context.Context, store lease.Store, name string) ([]lease.Standing, error) {
	list, err := store.Candidates(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("read the candidates of %q: %w", name, err)
	}
	return list, nil
}

func viewCandidates(list []lease.Standing, now time.Time) []candidateView {
	out := make([]candidateView, 0, len(list))
	for _, s := range list {
		v := candidateView{Holder: s.Holder, Priority: s.Priority, Preempt: s.Preempt, Eligible: s.Eligible()}
		if !s.Eligible() {
			until := now.Add(s.Ineligible).UTC().Round(time.Millisecond)
			v.IneligibleUntil, v.Note = &until, s.Note
		}
		out = append(out, v)
	}
	return out
}

// printCandidates prints the candidates of name under its status line.
func printCandidates(w io.Writer, list []lease.Standing) error {
	fmt.Fprintln(w)
	if len(list) == 0 {
		fmt.Fprintln(w, "no live candidates")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CANDIDATE\tPRIORITY\tPREEMPT\tELIGIBLE\tWHY NOT")
	now := time.Now()
	for _, v := range viewCandidates(list, now) {
		preempt, eligible, why := "no", "yes", "-"
		if v.Preempt {
			preempt = "yes"
		}
		if !v.Eligible {
			eligible = "no, until " + fmtTime(*v.IneligibleUntil)
			why = shownNote(v.Note)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\n", observe.Shown(v.Holder), v.Priority, preempt, eligible, why)
	}
	return tw.Flush()
}

// shownNote is a candidate's note for a terminal: as it is when it is
// printable text (leaderrun escapes what it writes there), quoted
// otherwise (another program's, or a tampered record).
func shownNote(note string) string {
	switch {
	case note == "":
		return "-"
	case utf8.ValidString(note) && strings.IndexFunc(note, func(r rune) bool { return !unicode.IsPrint(r) }) < 0:
		return note
	}
	return strconv.Quote(note)
}

// candidateWatch follows a name's candidates for watch: the priority of
// the holder, and an event each time a candidate becomes ineligible (a
// hand-over for health) with its note.
type candidateWatch struct {
	list []lease.Standing
	said map[string]string // holder → the ineligibility note last said
}

// read reads the candidates, keeping the last list on a failure: they
// only add to the events of the record.
func (cw *candidateWatch) read(ctx context.Context, store lease.Store, name string) {
	if list, err := candidatesOf(ctx, store, name); err == nil {
		cw.list = list
	}
}

// priority is holder's priority, as its candidacy says.
func (cw *candidateWatch) priority(holder string) int32 {
	for _, s := range cw.list {
		if s.Holder == holder {
			return s.Priority
		}
	}
	return 0
}

// emitIneligible prints an "unhealthy" event for each candidate that is
// newly ineligible, or ineligible with a new note.
func (cw *candidateWatch) emitIneligible(e *eventWriter, name string) {
	if cw.said == nil {
		cw.said = map[string]string{}
	}
	at := time.Now()
	for _, s := range cw.list {
		if s.Eligible() {
			delete(cw.said, s.Holder)
			continue
		}
		if note, ok := cw.said[s.Holder]; ok && note == s.Note {
			continue
		}
		cw.said[s.Holder] = s.Note
		until := at.Add(s.Ineligible).UTC().Round(time.Millisecond)
		ev := eventJSON{Time: now(), Event: "unhealthy", Name: name, Holder: s.Holder, Until: &until, Note: s.Note}
		if e.json {
			json.NewEncoder(e).Encode(ev)
			continue
		}
		fmt.Fprintf(e, "%s %-8s name=%s holder=%s until=%s note=%s\n", ev.Time.Format(eventTime), ev.Event,
			observe.Shown(name), observe.Shown(s.Holder), until.Format(eventTime), strconv.Quote(s.Note))
	}
}

// encodeWithCandidates writes rec with its candidates, as status --json
// shows one name.
func encodeWithCandidates(ctx context.Context, enc *json.Encoder, store lease.Store, rec lease.Record) error {
	list, err := candidatesOf(ctx, store, rec.Name)
	if err != nil {
		return err
	}
	return enc.Encode(recordWithCandidates{RecordView: observe.ViewRecord(rec), Candidates: viewCandidates(list, time.Now())})
}

// printNameCandidates prints name's candidates under its status line.
func printNameCandidates(ctx context.Context, w io.Writer, store lease.Store, name string) error {
	list, err := candidatesOf(ctx, store, name)
	if err != nil {
		return err
	}
	return printCandidates(w, list)
}
