package replica

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/observe"
	"github.com/leaderrun/leaderrun/sdnotify"
	"github.com/leaderrun/leaderrun/supervise"
)

// reporter tells an operator's tools what the election is doing: the HTTP
// endpoints and metrics (observe) and systemd (sdnotify). Its methods are
// safe for concurrent use; a nil Notifier makes the systemd part a no-op.
type reporter struct {
	name       string
	partitions int // --partitions; 0 for one name
	obs        *observe.Observer
	sd         *sdnotify.Notifier

	mu         sync.Mutex // guards leader and isStopping
	leader     string     // the other holder last seen while standing by
	isStopping bool       // STOPPING=1 was sent: no later status says otherwise
}

func newReporter(name, holder string, renewDeadline time.Duration) *reporter {
	return &reporter{name: name, obs: observe.New(name, holder, renewDeadline), sd: sdnotify.FromEnv()}
}

// storeCall is the election's Elector.Observe hook, and the Owner's.
func (r *reporter) storeCall(op string, took time.Duration, err error) {
	if op == "reconcile" {
		r.obs.Reconciled(took)
		return
	}
	r.obs.StoreCall(op, took, err)
	var held *lease.HeldError
	if r.partitions > 0 || !errors.As(err, &held) {
		return
	}
	r.mu.Lock()
	changed := r.leader != held.Record.Holder
	r.leader = held.Record.Holder
	r.mu.Unlock()
	if changed {
		r.status(fmt.Sprintf("standby: %s leads %s (token %d)", held.Record.Holder, r.name, held.Record.Token))
	}
}

// status sends systemd the status s, unless the replica is stopping.
func (r *reporter) status(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.isStopping {
		r.sd.Status(s)
	}
}

// campaigning says the process works and campaigns: systemd counts a
// standby as started.
func (r *reporter) campaigning() {
	r.sd.Notify("READY=1\nSTATUS=standby: campaigning for " + r.name)
}

func (r *reporter) elected(token int64) {
	r.obs.Elected(token)
	r.status(fmt.Sprintf("leading %s with token %d", r.name, token))
}

func (r *reporter) ended(ten *elect.Tenure, status supervise.Status, exited bool) {
	if exited {
		r.obs.ChildExited(status.ExitCode())
	}
	r.obs.Ended(context.Cause(ten.Context()))
	r.mu.Lock()
	r.leader = ""
	r.mu.Unlock()
	r.status("standby: campaigning for " + r.name)
}

// stopping tells systemd that the replica stops; the statuses the rest of
// the shutdown would send (a tenure ended, campaigning) are not sent.
func (r *reporter) stopping() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.isStopping = true
	r.sd.Notify("STOPPING=1\nSTATUS=stopping")
}

// partitioned makes the reporter a partitioned replica's; view is the
// body of GET /partitions.
func (r *reporter) partitioned(n int, view func() any) {
	r.partitions = n
	r.obs.Partitioned(n, func() any { return view() })
}

// joining says the process works and joins the group.
func (r *reporter) joining() {
	r.sd.Notify("READY=1\nSTATUS=" + r.owns())
}

func (r *reporter) partitionStarted(p int, token int64) {
	r.obs.PartitionStarted(p, token)
	r.status(r.owns())
}

func (r *reporter) partitionEnded(p int, ten *elect.Tenure, status supervise.Status, exited bool) {
	if exited {
		r.obs.ChildExited(status.ExitCode())
	}
	cause := context.Cause(ten.Context())
	if cause == nil { // the command ended on its own: the partition is given back next
		cause = elect.ErrReleased
	}
	r.obs.PartitionEnded(p, cause)
	r.status(r.owns())
}

// owns is a partitioned replica's systemd status.
func (r *reporter) owns() string {
	return fmt.Sprintf("owns %d of %d partitions of %s", r.obs.Owned(), r.partitions, r.name)
}

// watchdog sends systemd's keep-alive while the store answers, until ctx
// ends; it returns at once when no watchdog is configured.
func (r *reporter) watchdog(ctx context.Context) {
	r.sd.RunWatchdog(ctx, r.obs.Healthy)
}
