package chaos

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// row is one line of the summary table: the rounds of one fault kind and
// child variant.
type row struct {
	kind, variant               string
	n                           int
	overlaps, frozen, known     int
	staleAccepted, staleRefused int
	orphans, badExits, late     int
	latencies                   []time.Duration
	maxFrozen                   time.Duration
}

// summarize prints the store's table and the lines that explain it.
func summarize(w io.Writer, store string, res *result, tm timing, bound time.Duration, seed uint64, elapsed time.Duration) {
	rows := map[string]*row{}
	var order []string
	get := func(kind, variant string) *row {
		k := kind + "/" + variant
		if rows[k] == nil {
			rows[k] = &row{kind: kind, variant: variant}
			order = append(order, k)
		}
		return rows[k]
	}
	byToken := map[int64]*row{}
	skipped := 0
	for _, rd := range res.rounds {
		if rd.skipped != "" {
			skipped++
			continue
		}
		r := get(rd.kind, rd.variant)
		byToken[rd.token] = r
		r.n++
		for _, rounds := range res.known {
			if rounds[rd.n] {
				r.known++
				break
			}
		}
		r.orphans += len(rd.orphans)
		r.staleAccepted += res.staleAccepted[rd.token]
		r.staleRefused += res.staleRefused[rd.token]
		r.badExits += res.badExits[rd.token]
		if !rd.gotNext || rd.latency > tm.ttl+bound {
			r.late++
		}
		if rd.gotNext {
			r.latencies = append(r.latencies, rd.latency)
		}
	}
	other := &row{kind: "(no fault)", variant: "-"}
	for _, o := range res.overlaps {
		r := byToken[o.prev]
		if r == nil {
			r = other
		}
		r.overlaps++
		switch o.class {
		case "frozen":
			r.frozen++
			r.maxFrozen = max(r.maxFrozen, o.dur)
		}
	}
	for tok, n := range res.staleAccepted {
		if byToken[tok] == nil {
			other.staleAccepted += n
		}
	}
	for tok, n := range res.staleRefused {
		if byToken[tok] == nil {
			other.staleRefused += n
		}
	}
	other.badExits = res.badExits[0]
	slices.SortFunc(order, func(a, b string) int { return strings.Compare(a, b) })

	fmt.Fprintf(w, "\n== chaos: %s — %d rounds (%d skipped) in %v, seed %d, ttl %v, kill-grace %v, renew-deadline %v (derived), new-leader bound ttl+%v\n",
		store, len(res.rounds), skipped, elapsed.Round(time.Second), seed, tm.ttl, tm.grace, tm.deadline, bound)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "fault\tchild\tfaults\toverlaps\tfrozen\tknown-defect-rounds\tstale-accepted\tstale-refused\torphans\tbad-exit\tlate-leader\tmax-new-leader\tp99-new-leader\t")
	total := &row{kind: "total", variant: ""}
	line := func(r *row) {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t\n",
			r.kind, r.variant, r.n, r.overlaps, r.frozen, r.known,
			writes(store, r.staleAccepted), writes(store, r.staleRefused),
			r.orphans, r.badExits, r.late, maxDur(r.latencies), p99(r.latencies))
	}
	for _, k := range order {
		r := rows[k]
		line(r)
		total.add(r)
	}
	if other.overlaps+other.staleAccepted+other.staleRefused+other.badExits > 0 {
		line(other)
		total.add(other)
	}
	line(total)
	tw.Flush()

	var frozenMax time.Duration
	for _, r := range rows {
		frozenMax = max(frozenMax, r.maxFrozen)
	}
	fmt.Fprintf(w, "frozen-supervisor overlaps: %d, longest %v", total.frozen, frozenMax.Round(time.Millisecond))
	if store == "postgres" {
		fmt.Fprintf(w, "; stale fenced writes refused %d, accepted %d; committed writes %d", total.staleRefused, total.staleAccepted, res.dbWrites)
	} else {
		fmt.Fprint(w, "; SQLite has no in-store fence, so harmlessness is shown on PostgreSQL only")
	}
	fmt.Fprintf(w, "\nunplanned leader changes (no fault injected): %d; tenures: %d\n", res.unplanned, len(res.tenures))
	for _, d := range knownDefects {
		if n := len(res.known[d.id]); n > 0 {
			fmt.Fprintf(w, "KNOWN DEFECT %s (in %d rounds, not counted as violations): %s\n", d.id, n, d.summary)
		}
	}
	fmt.Fprintf(w, "violations: %d\n", len(res.violations))
	for _, v := range res.violations {
		fmt.Fprintf(w, "  VIOLATION %s\n", v)
	}
}

func (t *row) add(r *row) {
	t.n += r.n
	t.overlaps += r.overlaps
	t.frozen += r.frozen
	t.known += r.known
	t.staleAccepted += r.staleAccepted
	t.staleRefused += r.staleRefused
	t.orphans += r.orphans
	t.badExits += r.badExits
	t.late += r.late
	t.latencies = append(t.latencies, r.latencies...)
	t.maxFrozen = max(t.maxFrozen, r.maxFrozen)
}

func writes(store string, n int) string {
	if store != "postgres" {
		return "n/a"
	}
	return fmt.Sprint(n)
}

func maxDur(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	return slices.Max(ds).Round(time.Millisecond).String()
}

// p99 is the nearest-rank 99th percentile.
func p99(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(math.Ceil(0.99*float64(len(s)))) - 1
	return s[i].Round(time.Millisecond).String()
}
