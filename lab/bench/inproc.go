package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/sqlite"
	_ "github.com/leaderrun/leaderrun/lease/stores" // registers every store
)

// Default timings of docs/design.md §2.
const (
	defTTL      = 15 * time.Second
	defDeadline = 8 * time.Second
	defPeriod   = 2 * time.Second
)

// inprocReplicas are lease.Electors in this process, one Store each, all
// campaigning for one name: the PostgreSQL statements that leaderrun
// replicas would make, without the processes.
type inprocReplicas struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	stores []lease.Store
}

func startInproc(ctx context.Context, dsn, name string, n int) (*inprocReplicas, error) {
	ctx, cancel := context.WithCancel(ctx)
	r := &inprocReplicas{cancel: cancel}
	for i := range n {
		st, err := lease.Open(ctx, dsn)
		if err != nil {
			r.stop()
			return nil, err
		}
		r.stores = append(r.stores, st)
		e := &elect.Elector{Store: st, Name: name, Holder: fmt.Sprintf("inproc-%d-%d", os.Getpid(), i),
			LeaseDuration: defTTL, RenewDeadline: defDeadline, RetryPeriod: defPeriod}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			holdLoop(ctx, e, nil, nil)
		}()
		if i == 0 {
			time.Sleep(500 * time.Millisecond) // let the first one lead
		}
	}
	return r, nil
}

func (r *inprocReplicas) stop() {
	r.cancel()
	r.wg.Wait()
	for _, st := range r.stores {
		st.Close()
	}
}

// holdLoop campaigns and holds e's name until ctx ends, then releases.
// onStart and onEnd, if set, are told of each tenure; onEnd gets the cause
// with which the tenure's context ended, or nil when ctx ended first.
func holdLoop(ctx context.Context, e *elect.Elector, onStart func(), onEnd func(cause error)) {
	for ctx.Err() == nil {
		ten, err := e.Campaign(ctx)
		if err != nil {
			if ctx.Err() == nil {
				time.Sleep(time.Second)
			}
			continue
		}
		if onStart != nil {
			onStart()
		}
		var cause error
		select {
		case <-ten.Context().Done():
			cause = context.Cause(ten.Context())
		case <-ctx.Done():
		}
		rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		ten.Release(rctx)
		cancel()
		if onEnd != nil {
			onEnd(cause)
		}
	}
}

// calibSQLite is the -calib-sqlite mode: n reads (Get) or n writes (Renew)
// on one held name, to be counted by strace. Operations are 2ms apart: the
// store's clock has millisecond resolution, and SQLite does not write a
// row whose bytes did not change, so back-to-back renewals within one
// millisecond would commit nothing.
func calibSQLite(path, op string, n int) error {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, path, sqlite.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	rec, err := st.Acquire(ctx, "calib", "calib", time.Hour)
	if err != nil {
		return err
	}
	for range n {
		time.Sleep(2 * time.Millisecond)
		switch op {
		case "read":
			_, err = st.Get(ctx, "calib")
		case "write":
			_, err = st.Renew(ctx, "calib", "calib", rec.Token, time.Hour)
		default:
			err = errors.New("unknown -calib-op " + op)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
