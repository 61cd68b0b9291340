package main

import (
	"context"
	"time"
)

// The "kube" section: leaderrun's Kubernetes store (k8s://NAMESPACE)
// beside client-go's own leader election (bench/kubeelector), both on one
// kube-apiserver that the section starts (internal/testenv/kubetest), measured in
// the same run: graceful hand-off, crash failover and the API server's
// lease requests for one leader and two followers (kube_run.go).

// kubeSection measures the section; kube_run.go sets it.
var kubeSection func(b *bench, ctx context.Context) *kubeResult

// kubeResult is the kube section's results.
type kubeResult struct {
	// Note says why the section measured nothing, or less than asked.
	Note string
	// Server is the API server's release, and what its /version says.
	Server      string
	HandoffRuns int
	CrashRuns   int
	Window      time.Duration
	// Settle is how long each group ran before its load window opened.
	Settle  time.Duration
	Handoff []*failoverResult
	Crash   []*failoverResult
	// Load is the lease requests the API server counted per system, the
	// first being the server alone (no replica running): its own leases.
	Load []*kubeLoad
	// Busy is how many of the machine's CPUs were busy during each part
	// of the section ("handoff LABEL", "crash LABEL", "crash expiry-bound").
	Busy map[string]float64
	// Masked says how the "as across hosts" leaderrun replicas ran, or why
	// they did not.
	Masked string
}

// kubeLoad is what the API server counted over one window.
type kubeLoad struct {
	Label  string
	Window time.Duration
	// Requests are Δ apiserver_request_total{resource="leases"} by verb
	// (and code, when not 2xx).
	Requests map[string]int64
	// WatchEvents is Δ apiserver_watch_events_total{resource="leases"}:
	// Lease changes sent to watchers.
	WatchEvents int64
	Err         string
}

// Total is the requests of every verb.
func (l *kubeLoad) Total() int64 {
	var n int64
	for _, v := range l.Requests {
		n += v
	}
	return n
}

// PerSecond is Total per second of the window.
func (l *kubeLoad) PerSecond() float64 {
	if l.Window <= 0 {
		return 0
	}
	return float64(l.Total()) / l.Window.Seconds()
}

// runKube runs the kube section, or says why it cannot.
func (b *bench) runKube(ctx context.Context) *kubeResult {
	if kubeSection == nil {
		return &kubeResult{Note: "not measured: this benchmark has no kube section"}
	}
	return kubeSection(b, ctx)
}
