package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/lab/bench/internal/mono"
	"github.com/leaderrun/leaderrun/lease"
)

// timedStore times every Renew of the Store it wraps while recording is on.
type timedStore struct {
	lease.Store
	rec *renewLog
}

func (s *timedStore) Renew(ctx context.Context, name, holder string, token int64, ttl time.Duration) (lease.Record, error) {
	t0 := mono.Now()
	rec, err := s.Store.Renew(ctx, name, holder, token, ttl)
	s.rec.add(mono.Since(t0), err)
	return rec, err
}

// renewLog collects renew latencies and outcomes while on.
type renewLog struct {
	on      atomic.Bool
	mu      sync.Mutex // guards the fields below
	lat     []time.Duration
	errs    int
	lost    int
	byError map[string]int
}

func (l *renewLog) add(d time.Duration, err error) {
	if !l.on.Load() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lat = append(l.lat, d)
	switch {
	case err == nil:
	case errors.Is(err, lease.ErrLost):
		l.lost++
	default:
		l.errs++
		if l.byError == nil {
			l.byError = map[string]int{}
		}
		l.byError[err.Error()]++
	}
}

// scaleResult is the 1,000-names measurement.
type scaleResult struct {
	Names, Replicas int
	Window          time.Duration
	RampUp          time.Duration // until every name was held
	Held, HeldEnd   int
	Renew           summary
	Renews          int
	RenewErrs       int
	RenewLost       int
	ErrSamples      []string
	// Losses: tenures that ended during the window with a cause other
	// than ErrReleased.
	Losses      int
	LossCauses  map[string]int
	Xacts       int64
	DBBackends  time.Duration // CPU of the database's backends over the window
	DBAux       time.Duration // CPU of the server's other processes
	BenchCPU    time.Duration // CPU of this process (all electors)
	BackendPids int
	// MachineBusy: CPUs busy machine-wide over the window, everything
	// included; what is not the database's or the benchmark's is someone
	// else's.
	MachineBusy float64
	Err         string
}

// runScale holds names names at once against PostgreSQL: replicas Stores
// (think: leaderrun hosts), each with one Elector per name, at default
// timings. Electors start at random moments within one renew period, as
// replicas started independently would.
func (b *bench) runScale(ctx context.Context, names, replicas int, window time.Duration) *scaleResult {
	r := &scaleResult{Names: names, Replicas: replicas, LossCauses: map[string]int{}}
	db := fmt.Sprintf("lrbench_%d_scale", os.Getpid())
	if err := b.pg.createDB(ctx, db); err != nil {
		r.Err = err.Error()
		return r
	}
	defer b.pg.dropDB(context.Background(), db)
	dsn := b.pg.dsnFor(db)

	log := &renewLog{}
	var stores []lease.Store
	defer func() {
		for _, s := range stores {
			s.Close()
		}
	}()
	for range replicas {
		st, err := lease.Open(ctx, dsn)
		if err != nil {
			r.Err = err.Error()
			return r
		}
		stores = append(stores, st)
	}

	var held atomic.Int64
	var inWindow atomic.Bool
	var mu sync.Mutex // guards r.Losses and r.LossCauses
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	t0 := mono.Now()
	for i := range names {
		for j, st := range stores {
			e := &elect.Elector{Store: &timedStore{Store: st, rec: log},
				Name: fmt.Sprintf("scale-%04d", i), Holder: fmt.Sprintf("replica-%d", j),
				LeaseDuration: defTTL, RenewDeadline: defDeadline, RetryPeriod: defPeriod}
			delay := rand.N(defPeriod)
			wg.Add(1)
			go func() {
				defer wg.Done()
				if sleepCtx(runCtx, delay) != nil {
					return
				}
				holdLoop(runCtx, e, func() { held.Add(1) }, func(cause error) {
					held.Add(-1)
					if cause != nil && !errors.Is(cause, elect.ErrReleased) && inWindow.Load() {
						mu.Lock()
						r.Losses++
						r.LossCauses[cause.Error()]++
						mu.Unlock()
					}
				})
			}()
		}
	}
	defer func() {
		cancel()
		wg.Wait()
	}()
	rampDeadline := time.Now().Add(90 * time.Second)
	for held.Load() < int64(names) && time.Now().Before(rampDeadline) && !b.stopping() {
		time.Sleep(50 * time.Millisecond)
	}
	r.RampUp = mono.Since(t0)
	r.Held = int(held.Load())
	if r.Held < names {
		r.Err = fmt.Sprintf("only %d of %d names held after %v", r.Held, names, r.RampUp.Round(time.Millisecond))
		return r
	}
	b.sleep(5 * time.Second) // let the acquisition burst settle

	backends, _ := b.pg.backendPids(ctx, db)
	aux, _ := b.pg.auxPids(ctx)
	startCPU := map[int]time.Duration{}
	for _, p := range append(append([]int(nil), backends...), aux...) {
		startCPU[p], _ = cpuTime(p)
	}
	self0, _ := cpuTime(os.Getpid())
	x0, _ := b.pg.xacts(ctx, db)
	log.on.Store(true)
	inWindow.Store(true)
	busy := machineBusy()
	w0 := mono.Now()
	b.sleep(window)
	log.on.Store(false)
	inWindow.Store(false)
	r.Window = mono.Since(w0)
	r.MachineBusy = busy()
	r.HeldEnd = int(held.Load())
	x1, _ := b.pg.xacts(ctx, db)
	self1, _ := cpuTime(os.Getpid())
	r.Xacts = x1 - x0
	r.BenchCPU = self1 - self0
	backends2, _ := b.pg.backendPids(ctx, db)
	seen := map[int]bool{}
	for _, p := range append(backends, backends2...) {
		if seen[p] {
			continue
		}
		seen[p] = true
		if c, err := cpuTime(p); err == nil {
			r.DBBackends += c - startCPU[p]
		}
	}
	r.BackendPids = len(seen)
	for _, p := range aux {
		if c, err := cpuTime(p); err == nil {
			r.DBAux += c - startCPU[p]
		}
	}

	log.mu.Lock()
	r.Renew = summarize(log.lat)
	r.Renews = len(log.lat)
	r.RenewErrs, r.RenewLost = log.errs, log.lost
	var msgs []string
	for m, n := range log.byError {
		msgs = append(msgs, fmt.Sprintf("%d× %s", n, m))
	}
	log.mu.Unlock()
	sort.Strings(msgs)
	if len(msgs) > 5 {
		msgs = msgs[:5]
	}
	r.ErrSamples = msgs
	return r
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
