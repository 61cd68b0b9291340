package chaos

import (
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// row is one line of the summary table: the rounds of one fault kind and
// child variant.
type row struct {
	kind, variant               string
	faults                      map[int]bool // the faults (round numbers) of this row
	n                           int          // tenures hit
	overlaps, frozen            int
	known                       map[int]bool
	staleAccepted, staleRefused int
	orphans, badExits, late     int
	kept                        int // tenures that went on after a transient fault
	latencies                   []time.Duration
	maxFrozen                   time.Duration
}

func newRow(kind, variant string) *row {
	return &row{kind: kind, variant: variant, faults: map[int]bool{}, known: map[int]bool{}}
}

// summarize prints the run's table and the lines that explain it.
func summarize(w io.Writer, label string, res *result, tm timing, bound time.Duration, seed uint64, elapsed time.Duration) {
	rows := map[string]*row{}
	var order []string
	get := func(kind, variant string) *row {
		k := kind + "/" + variant
		if rows[k] == nil {
			rows[k] = newRow(kind, variant)
			order = append(order, k)
		}
		return rows[k]
	}
	// A tenure's overlaps and stale writes count in the row of the last
	// fault that hit it: the one that ended it (an earlier, transient one
	// left it intact).
	byKey := map[tkey]*row{}
	byFault := map[int]*row{}
	skipped, faults := map[int]bool{}, map[int]bool{}
	for _, rd := range res.rounds {
		faults[rd.n] = true
		if rd.skipped != "" {
			skipped[rd.n] = true
			continue
		}
		r := get(rd.kind, rd.variant)
		byKey[tkey{rd.part, rd.token}] = r
		byFault[rd.n] = r
		r.faults[rd.n] = true
		r.n++
		if res.knownIn[rd] {
			r.known[rd.n] = true
		}
		r.orphans += len(rd.orphans)
		switch {
		case rd.gotNext:
			r.latencies = append(r.latencies, rd.latency)
			if latency, limit := newChildBound(rd, tm, bound); latency > limit {
				r.late++
			}
		case rd.wentOn:
			r.kept++
		default:
			r.late++
		}
	}
	for n, bad := range res.badExits {
		if r := byFault[n]; r != nil && n != 0 {
			r.badExits += bad
		}
	}
	other := newRow("(no fault)", "-")
	for _, o := range res.overlaps {
		r := byKey[tkey{o.part, o.prev}]
		if r == nil {
			r = other
		}
		r.overlaps++
		if o.class == "frozen" {
			r.frozen++
			r.maxFrozen = max(r.maxFrozen, o.dur)
		}
	}
	for k, n := range res.staleAccepted {
		if r := byKey[k]; r != nil {
			r.staleAccepted += n
		} else {
			other.staleAccepted += n
		}
	}
	for k, n := range res.staleRefused {
		if r := byKey[k]; r != nil {
			r.staleRefused += n
		} else {
			other.staleRefused += n
		}
	}
	other.badExits = res.badExits[0]
	slices.SortFunc(order, func(a, b string) int { return strings.Compare(a, b) })

	fmt.Fprintf(w, "\n== chaos: %s — %d faults (%d skipped) in %v, seed %d, ttl %v, kill-grace %v, renew-deadline %v (derived)",
		label, len(faults), len(skipped), elapsed.Round(time.Second), seed, tm.ttl, tm.grace, tm.deadline)
	if tm.reconcile > 0 {
		fmt.Fprintf(w, ", reconcile-interval %v", tm.reconcile)
	}
	fmt.Fprintf(w, ", new-child bound ttl+%v\n", tm.reconcile+bound)
	fmt.Fprintf(w, "mode: %s\n", modeLine())
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "fault\tchild\tfaults\ttenures-hit\tkept\toverlaps\tfrozen\tknown-defect-faults\tstale-accepted\tstale-refused\torphans\tbad-exit\tlate-child\tmax-new-child\tp99-new-child\t")
	total := newRow("total", "")
	line := func(r *row) {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t\n",
			r.kind, r.variant, len(r.faults), r.n, r.kept, r.overlaps, r.frozen, len(r.known),
			writes(res.fenced, r.staleAccepted), writes(res.fenced, r.staleRefused),
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
	if res.fenced {
		fmt.Fprintf(w, "; stale fenced writes refused %d, accepted %d; committed writes %d", total.staleRefused, total.staleAccepted, res.dbWrites)
	} else {
		fmt.Fprint(w, "; this store has no in-store fence, so harmlessness is shown on PostgreSQL and MySQL only")
	}
	what := "leader changes"
	if res.partitions > 0 {
		what = "partition moves"
	}
	fmt.Fprintf(w, "\nunplanned %s (no fault injected): %d; tenures: %d; longest time without a child: %v",
		what, res.unplanned, len(res.tenures), res.longestGap.Round(time.Millisecond))
	if res.longestGapWhat != "" {
		fmt.Fprintf(w, " (%s)", res.longestGapWhat)
	}
	fmt.Fprintln(w)
	for _, d := range knownDefects {
		if n := len(res.known[d.id]); n > 0 {
			fmt.Fprintf(w, "KNOWN DEFECT %s (in %d faults, not counted as violations): %s\n", d.id, n, d.summary)
		}
	}
	fmt.Fprintf(w, "violations: %d\n", len(res.violations))
	for _, v := range res.violations {
		fmt.Fprintf(w, "  VIOLATION %s\n", v)
	}
}

func (t *row) add(r *row) {
	for n := range r.faults {
		t.faults[n] = true
	}
	for n := range r.known {
		t.known[n] = true
	}
	t.n += r.n
	t.kept += r.kept
	t.overlaps += r.overlaps
	t.frozen += r.frozen
	t.staleAccepted += r.staleAccepted
	t.staleRefused += r.staleRefused
	t.orphans += r.orphans
	t.badExits += r.badExits
	t.late += r.late
	t.latencies = append(t.latencies, r.latencies...)
	t.maxFrozen = max(t.maxFrozen, r.maxFrozen)
}

func writes(fenced bool, n int) string {
	if !fenced {
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

// modeLine says how the replicas ran: as which user, with or without the
// child's own PID namespace, and whether commands got cgroups of their own.
func modeLine() string {
	ns := "--pid-namespace=false"
	if *flagNS {
		ns = "default (the child in a PID namespace of its own)"
	}
	return fmt.Sprintf("uid %d, %s, command cgroups %v", os.Getuid(), ns, commandCgroups)
}
