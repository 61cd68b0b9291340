package leasetest

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// The model-based test: random sequences of operations from several
// holders, on one name and on a group's partitions, and steps of the
// store's clock, applied to a store and to the lease rules of package
// lease (Grant, Renew, StepDown and the others), which must agree on
// every result and every record, candidacies included (Campaign,
// Withdraw, Candidates, Forget). A failing sequence is shrunk (operations
// dropped while it still fails) and reported with its seed.
//
// Environment:
//
//	LEADERRUN_MODEL=long             ten times the sequences
//	LEADERRUN_MODEL_SEQUENCES=N      N sequences
//	LEADERRUN_MODEL_SEED=S           only the sequence of seed S (as a failure reports it)

// ModelHarness gives RunModel handles on a store. Every sequence runs on
// names of its own, so that sequences may run at once, on handles of one
// store or of several, each with a clock of its own.
type ModelHarness struct {
	// Open returns a new handle on the store, with its clock. RunModel
	// opens one for each sequence it runs at once (Parallel), and closes
	// it.
	Open func(t *testing.T) ModelStore
	// TTLs are the lease and membership durations sequences use, Windows
	// the step-down windows, Steps the clock steps; nil: defaults for a
	// virtual clock.
	TTLs, Windows, Steps []time.Duration
	// Late is how much later than the rules say a lease may end and
	// still report time left (etcd's whole seconds and revocation
	// delay); zero for a store that ends it on time.
	Late time.Duration
	// SeesGranted marks a store that records an Acquire's holder as a
	// candidate also when it is granted (the contract allows it).
	SeesGranted bool
	// KeepsFresh marks a store that may leave a candidate that is still
	// lease.Candidate.Fresh as it is on a refusal, instead of writing it
	// again (the contract allows it).
	KeepsFresh bool
	// ReleasesUnclaimed marks a store whose rounds renew a member's
	// partitions together, once a round claimed them (etcd: they share
	// the member's lease), and so release those a later round does not
	// claim (the contract allows it); its rounds' own result still shows
	// them held.
	ReleasesUnclaimed bool
	// Sequences is how many sequences run by default (0: 300), and
	// RaceSequences how many under the race detector (0: as many), for a
	// store whose own work it slows several times over (SQLite's, in Go);
	// Parallel is how many run at once (0: 1).
	Sequences, RaceSequences, Parallel int
	// Length is the number of operations of a sequence (0: 30).
	Length int
}

// ModelStore is a handle on the store under test, with its clock.
type ModelStore struct {
	lease.Store
	// Clock is the handle's clock: a VirtualClock where the test can set
	// it, so that an operation happens exactly when the model says, and
	// a RealClock otherwise.
	Clock ModelClock
	// Plant writes a record behind the store's back, as an operator or a
	// restore from backup might leave it: rec.Name's record, held by
	// rec.Holder with rec.Token, released if rec.Released, expired at
	// rec.Expires (a time on the clock, before its now), with no
	// step-down, reservation or Where. Nil: sequences plant nothing.
	Plant func(t *testing.T, rec lease.Record)
}

// ModelClock is the store's clock as the model-based test sees it.
type ModelClock interface {
	// Now reads the store's clock.
	Now(ctx context.Context) (time.Time, error)
	// Advance lets d pass on the store's clock.
	Advance(ctx context.Context, d time.Duration)
	// Exact reports a clock that only Advance moves: an operation
	// happens exactly at Now.
	Exact() bool
}

// VirtualClock is a store clock that only the test moves. A store takes
// it through a test hook (export_test.go in the store's package); it
// starts a day ahead of the wall clock, on a whole millisecond, and only
// ever shows whole milliseconds: every store can keep such an instant
// (SQLite keeps milliseconds, PostgreSQL microseconds), so what a store
// writes at it is what the model writes.
type VirtualClock struct{ ns atomic.Int64 }

// NewVirtualClock returns a virtual clock a day ahead of the wall clock.
func NewVirtualClock() *VirtualClock {
	c := &VirtualClock{}
	c.ns.Store(time.Now().Add(24 * time.Hour).Truncate(time.Millisecond).UnixNano())
	return c
}

// Read returns the clock's time.
func (c *VirtualClock) Read() time.Time { return time.Unix(0, c.ns.Load()) }

func (c *VirtualClock) Now(context.Context) (time.Time, error) { return c.Read(), nil }

// Advance lets d pass, and then up to the next whole millisecond: the
// model's own instants (a candidate seen just after an operation) may lie
// between two.
func (c *VirtualClock) Advance(_ context.Context, d time.Duration) {
	ms := int64(time.Millisecond)
	t := c.ns.Load() + int64(d)
	c.ns.Store((t + ms - 1) / ms * ms)
}

func (c *VirtualClock) Exact() bool { return true }

// RealClock is a store clock that runs by itself; Read reads it.
type RealClock struct {
	Read func(ctx context.Context) (time.Time, error)
}

func (c RealClock) Now(ctx context.Context) (time.Time, error) { return c.Read(ctx) }

func (c RealClock) Advance(ctx context.Context, d time.Duration) {
	select {
	case <-time.After(d):
	case <-ctx.Done():
	}
}

func (c RealClock) Exact() bool { return false }

// RunModel runs the model-based test on h's store.
func RunModel(t *testing.T, h ModelHarness) {
	h.defaults()
	seqs := h.Sequences
	if raceDetector && h.RaceSequences > 0 {
		seqs = h.RaceSequences
	}
	switch {
	case os.Getenv("LEADERRUN_MODEL_SEQUENCES") != "":
		n, err := strconv.Atoi(os.Getenv("LEADERRUN_MODEL_SEQUENCES"))
		if err != nil || n < 1 {
			t.Fatalf("LEADERRUN_MODEL_SEQUENCES=%q: want a positive number", os.Getenv("LEADERRUN_MODEL_SEQUENCES"))
		}
		seqs = n
	case os.Getenv("LEADERRUN_MODEL") == "long":
		seqs *= 10
	}
	base := rand.Uint64()
	seeds := make([]uint64, seqs)
	for i := range seeds {
		seeds[i] = base + uint64(i)
	}
	if s := os.Getenv("LEADERRUN_MODEL_SEED"); s != "" {
		seed, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("LEADERRUN_MODEL_SEED=%q: %v", s, err)
		}
		seeds = []uint64{seed}
	}
	t.Logf("model: %d sequences, seeds %d … (replay one with LEADERRUN_MODEL_SEED)", len(seeds), seeds[0])
	r := &modelRun{h: h, t: t, id: strconv.FormatUint(rand.Uint64()%1e6, 36)}
	workers := max(h.Parallel, 1)
	start := time.Now()
	var (
		wg     sync.WaitGroup
		next   atomic.Int64
		failed atomic.Bool
		ops    atomic.Int64
	)
	for range workers {
		wg.Go(func() {
			s := h.Open(t)
			defer s.Close()
			if s.Clock == nil {
				t.Error("ModelHarness.Open returned a store without a clock")
				return
			}
			for !failed.Load() {
				i := next.Add(1) - 1
				if int(i) >= len(seeds) {
					return
				}
				seq := r.generate(seeds[i], s.Plant != nil)
				ops.Add(int64(len(seq)))
				if f := r.run(s, seq); f != nil {
					if failed.CompareAndSwap(false, true) {
						r.report(s, seeds[i], seq, f)
					}
					return
				}
			}
		})
	}
	wg.Wait()
	t.Logf("model: %d sequences of %d operations (%d in all) in %v", min(int(next.Load()), len(seeds)), h.Length, ops.Load(),
		time.Since(start).Round(time.Millisecond))
	t.Logf("model: results: %s", r.summary())
}

func (h *ModelHarness) defaults() {
	if h.TTLs == nil {
		h.TTLs = []time.Duration{20 * time.Millisecond, 100 * time.Millisecond, 500 * time.Millisecond}
	}
	if h.Windows == nil {
		h.Windows = []time.Duration{20 * time.Millisecond, 60 * time.Millisecond}
	}
	if h.Steps == nil {
		h.Steps = []time.Duration{time.Millisecond, 3 * time.Millisecond, 10 * time.Millisecond, 50 * time.Millisecond}
	}
	if h.Sequences == 0 {
		h.Sequences = 300
	}
	if h.Length == 0 {
		h.Length = 30
	}
}

// modelRun is one RunModel.
type modelRun struct {
	h    ModelHarness
	t    *testing.T
	id   string // distinguishes this run's names from another's in the same store
	runs atomic.Int64

	mu      sync.Mutex     // guards results
	results map[string]int // operation and result → how often
}

// count notes an operation's result for the summary.
func (r *modelRun) count(kind opKind, result string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.results == nil {
		r.results = map[string]int{}
	}
	r.results[opNames[kind]+" "+result]++
}

// summary lists how often each operation had each result.
func (r *modelRun) summary() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(r.results)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, r.results[k]))
	}
	return strings.Join(parts, ", ")
}

// failure is where and why a sequence failed.
type failure struct {
	at    int // the operation
	why   string
	trace []string
}

// report shrinks the failing sequence seq and reports it.
func (r *modelRun) report(s ModelStore, seed uint64, seq []op, f *failure) {
	r.t.Helper()
	shrunk, sf := r.shrink(s, seq, f)
	var b strings.Builder
	fmt.Fprintf(&b, "model: sequence of seed %d failed at operation %d of %d: %s\n", seed, f.at+1, len(seq), f.why)
	fmt.Fprintf(&b, "shrunk to %d operations, which fail at operation %d: %s\n", len(shrunk), sf.at+1, sf.why)
	for _, line := range sf.trace {
		b.WriteString("  " + line + "\n")
	}
	fmt.Fprintf(&b, "replay: LEADERRUN_MODEL_SEED=%d go test -count=1 -run '^%s$' in this package", seed, r.t.Name())
	r.t.Error(b.String())
}

// shrink drops operations from seq while it still fails, within a budget
// of runs and time, and returns the shortest failing sequence found.
func (r *modelRun) shrink(s ModelStore, seq []op, f *failure) ([]op, *failure) {
	seq = seq[:f.at+1]
	deadline := time.Now().Add(2 * time.Minute)
	budget := 300
	for chunk := len(seq) / 2; chunk >= 1; chunk /= 2 {
		for i := 0; i+chunk <= len(seq) && budget > 0 && time.Now().Before(deadline); {
			cand := append(append([]op{}, seq[:i]...), seq[i+chunk:]...)
			budget--
			if cf := r.run(s, cand); cf != nil {
				seq, f = cand[:cf.at+1], cf
				continue
			}
			i += chunk
		}
	}
	return seq, f
}

// names are the names of one run of a sequence.
type names struct {
	prefix, name, group string
}

func (r *modelRun) namesOf() names {
	p := fmt.Sprintf("m%s-%d", r.id, r.runs.Add(1))
	return names{prefix: p, name: p + "-n", group: p + "-g"}
}

// key is the lease name of target 0 (the name) or 1 … partitions
// (partition target-1).
func (n names) key(target int) string {
	if target <= 0 {
		return n.name
	}
	return lease.PartitionKey(n.group, target-1)
}
