package cmd

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/observe"
	"github.com/leaderrun/leaderrun/sdnotify"
	"github.com/leaderrun/leaderrun/supervise"
)

// reporter tells an operator's tools what the election is doing: the HTTP
// endpoints and metrics (observe) and systemd (sdnotify). Its methods are
// safe for concurrent use; a nil Notifier makes the systemd part a no-op.
type reporter struct {
	name string
	obs  *observe.Observer
	sd   *sdnotify.Notifier

	mu     sync.Mutex // guards leader
	leader string     // the other holder last seen while standing by
}

func newReporter(name, holder string, renewDeadline time.Duration) *reporter {
	return &reporter{name: name, obs: observe.New(name, holder, renewDeadline), sd: sdnotify.FromEnv()}
}

// storeCall is the election's Elector.Observe hook.
func (r *reporter) storeCall(op string, took time.Duration, err error) {
	r.obs.StoreCall(op, took, err)
	var held *lease.HeldError
	if !errors.As(err, &held) {
		return
	}
	r.mu.Lock()
	changed := r.leader != held.Record.Holder
	r.leader = held.Record.Holder
	r.mu.Unlock()
	if changed {
		r.sd.Status(fmt.Sprintf("standby: %s leads %s (token %d)", held.Record.Holder, r.name, held.Record.Token))
	}
}

// campaigning says the process works and campaigns: systemd counts a
// standby as started.
func (r *reporter) campaigning() {
	r.sd.Notify("READY=1\nSTATUS=standby: campaigning for " + r.name)
}

func (r *reporter) elected(token int64) {
	r.obs.Elected(token)
	r.sd.Status(fmt.Sprintf("leading %s with token %d", r.name, token))
}

func (r *reporter) ended(ten *lease.Tenure, status supervise.Status, exited bool) {
	if exited {
		r.obs.ChildExited(status.ExitCode())
	}
	r.obs.Ended(context.Cause(ten.Context()))
	r.mu.Lock()
	r.leader = ""
	r.mu.Unlock()
	r.sd.Status("standby: campaigning for " + r.name)
}

func (r *reporter) stopping() { r.sd.Stopping() }

// watchdog sends systemd's keep-alive while the store answers, until ctx
// ends; it returns at once when no watchdog is configured.
func (r *reporter) watchdog(ctx context.Context) {
	r.sd.RunWatchdog(ctx, r.obs.Healthy)
}
