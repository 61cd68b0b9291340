package replica

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/observe"
)

// A partition whose command keeps failing on this replica is given up for a
// while, so that another replica tries it: after stepAsideAfter failures in
// a row, this replica steps aside from it for stepAsideWindow (a step-down
// reservation against itself; the partition's fallback member takes it).
// It counts the failures on, so that it steps aside again after the next
// failure, until the command once succeeds here.
const (
	stepAsideAfter  = 3
	stepAsideWindow = maxRestartDelay
)

// partitioned runs one command per partition this replica owns
// (--partitions): a elect.Owner joins the group and hands it the
// partitions to run and to stop, each a tenure of its own, served as a
// single name's is.
type partitioned struct {
	*Replica
	owner *elect.Owner // set by run once the store is open

	// guarded by mu:
	running  map[int]child     // the running commands, by partition
	restarts map[int]*restarts // exits of each partition's command

	served sync.WaitGroup // one per partition's tenure
}

func newPartitioned(r *Replica) *partitioned {
	pr := &partitioned{Replica: r, running: map[int]child{}, restarts: map[int]*restarts{}}
	r.children = func() []child {
		r.mu.Lock()
		defer r.mu.Unlock()
		return slices.Collect(maps.Values(pr.running))
	}
	r.mode = pr
	r.report.partitioned(r.cfg.Partitions, pr.view)
	return pr
}

// run opens the store, joins the group and runs the partitions it is
// given until told to stop; then it leaves the group first (the others
// take over at once), hands every partition off in parallel, and returns
// nil. It returns the store's refusal to let it join (another partition
// count among them: exit 125).
func (pr *partitioned) run() error {
	store, err := pr.openStore()
	if err != nil {
		return err
	}
	defer store.Close()
	rc := pr.cfg
	if err := pr.checkMode(store, true); err != nil {
		return err
	}
	pr.mu.Lock()
	pr.owner = &elect.Owner{
		Store: store, Group: rc.Name, Partitions: rc.Partitions, Member: pr.holder,
		LeaseDuration: rc.LeaseDuration, RenewDeadline: rc.RenewDeadline, RetryPeriod: rc.RetryPeriod,
		ReconcileInterval: rc.ReconcileInterval,
		ReconcileTimeout:  reconcileTimeout(rc),
		Started:           pr.started,
		Logger:            pr.log, Clock: pr.clock, Observe: pr.report.storeCall,
		Prover: pr.prover(),
	}
	pr.mu.Unlock()
	pr.report.joining()
	pr.log.Info("joining the group", "store", store.Describe(), "partitions", rc.Partitions)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-pr.stopping; cancel() }()
	err = pr.owner.Run(ctx)
	pr.served.Wait()
	pr.withdrawPartitions(store) // it campaigns no more
	if errors.Is(err, context.Canceled) && pr.stopped() {
		pr.log.Info("stopped while joining")
		return context.Canceled
	}
	return err
}

// reconcileTimeout is --reconcile-timeout, or its default: long enough for
// a hand-off that uses its whole kill grace.
func reconcileTimeout(rc Config) time.Duration {
	if rc.ReconcileTimeout > 0 {
		return rc.ReconcileTimeout
	}
	return max(elect.DefaultReconcileTimeout, 2*rc.KillGrace)
}

// started is the owner's Started hook: it serves partition p's tenure on a
// goroutine of its own, so that hand-offs run in parallel.
func (pr *partitioned) started(p int, t *elect.Tenure) {
	pr.served.Add(1)
	go func() {
		defer pr.served.Done()
		pr.servePartition(p, t)
	}()
}

// servePartition runs partition p's command for tenure t, stops it when
// the tenure ends (lost, past its deadline, handed off, stepped down), and
// then gives the partition back: released, with a restart delay when the
// command ended on its own, or stepped aside from when it keeps failing.
func (pr *partitioned) servePartition(p int, t *elect.Tenure) {
	log := pr.log.With("partition", p, "token", t.Token())
	pr.report.partitionStarted(p, t.Token())
	log.Info("starting command", "command", strings.Join(pr.cfg.Command, " "))
	env := pr.childEnv(t,
		"LEADERRUN_PARTITION="+strconv.Itoa(p),
		"LEADERRUN_PARTITIONS="+strconv.Itoa(pr.cfg.Partitions))
	end := pr.serve(t, env, log, func(c child) {
		if c == nil {
			delete(pr.running, p)
		} else {
			pr.running[p] = c
			go pr.annotate(t, c, nil, log)
		}
	}, nil)
	pr.report.partitionEnded(p, t, end.status, end.exited)
	if !end.exited {
		pr.release(t, log, end.why, false)
		return
	}
	pr.mu.Lock()
	h := pr.restarts[p]
	if h == nil {
		h = &restarts{}
		pr.restarts[p] = h
	}
	pr.mu.Unlock()
	// Only this partition's goroutine uses h: mu guards the map alone.
	delay := pr.countExit(h, end, log, "starting the partition's command again", time.Now())
	failures := h.failures
	if failures >= stepAsideAfter && !pr.stopped() {
		log.Warn("the partition's command keeps failing here; stepping aside so that another replica runs it",
			"consecutive_failures", failures, "window", stepAsideWindow)
		pr.owner.HoldOff(p, time.Now().Add(stepAsideWindow))
		ctx, cancel := context.WithTimeout(context.Background(), releaseTimeout)
		defer cancel()
		if err := t.StepAside(ctx, stepAsideWindow); err != nil {
			log.Warn("tenure over; could not release the partition, it expires on its own", "why", end.why, "err", err)
			return
		}
		log.Info("tenure over; stepped aside from the partition", "why", end.why)
		return
	}
	pr.owner.HoldOff(p, time.Now().Add(delay))
	pr.release(t, log, end.why, false)
}

// view is GET /partitions: the group as this replica last read it, and the
// partitions it holds.
func (pr *partitioned) view() any {
	pr.mu.Lock()
	owner := pr.owner
	pr.mu.Unlock()
	v := observe.PartitionsView{Self: pr.holder, Owned: []int{}}
	v.GroupView = observe.ViewGroup(lease.Group{Name: pr.cfg.Name, Partitions: pr.cfg.Partitions})
	if owner != nil {
		g := owner.View()
		if g.Name != "" {
			v.GroupView = observe.ViewGroup(g)
		}
		v.Owned = append(v.Owned, owner.Held()...)
	}
	return v
}
