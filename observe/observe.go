// Package observe tracks one leaderrun process's election state and serves
// it over HTTP: /healthz for probes, /leader for load balancers and
// scripts, /metrics for Prometheus.
//
// An Observer learns everything from calls made by the election loop's
// owner: StoreCall (plugged into elect.Elector.Observe) after every store
// operation, Elected and Ended around each tenure, ChildExited when the
// command exits. It never calls the store itself.
//
// # Health
//
// Healthy reports whether this process is reaching the store. It turns
// false when store calls have been failing, with no answer in between, for
// renewDeadline, measured from when the first of those failed calls was
// sent; a success, a *lease.HeldError or lease.ErrLost is an answer. The
// process counts as failing from New until the first answer, which gives it
// renewDeadline of grace to reach the store at all.
//
// Quiet periods without failures do not count against it: a standby
// legitimately makes no store call until the holder's lease should expire,
// which may be longer than the renew deadline, and none is made during a
// restart delay.
//
// # Metrics
//
// Every metric below carries the constant label name (the lease name).
// The registry also holds the standard go_* and process_* collectors.
//
//	leaderrun_leading                      gauge: 1 while this process holds the lease, else 0
//	leaderrun_token                        gauge: the current tenure's fencing token, 0 on standby
//	leaderrun_tenures_total                counter: tenures started
//	leaderrun_tenure_ends_total{cause}     counter: tenures ended, cause = lost|deadline|released|stepdown|other
//	leaderrun_store_calls_total{op,result} counter: store calls, op = acquire|renew|release,
//	                                         result = ok|held|lost|error
//	leaderrun_renew_duration_seconds       histogram: round-trip time of renew calls, whatever their outcome
//	leaderrun_seconds_since_last_renew     gauge: while leading, time since the last successful renew
//	                                         (or since the tenure started); after a tenure that ended
//	                                         with the store unreachable, still counting until the store
//	                                         answers; else 0 on standby
//	leaderrun_child_exits_total{code}      counter: command exits by exit code (128+N for signal N)
//	leaderrun_health_checks_total          counter: health checks run to their end (--health-cmd)
//	leaderrun_health_check_failures_total  counter: of those, the failed ones (non-zero exit, timeout, not started)
//	leaderrun_health_handovers_total       counter: hand-overs of the name because the command was unhealthy
//	leaderrun_health_restarts_total        counter: restarts of the unhealthy command, no other replica being
//	                                         live and eligible
//
// A partitioned replica (Partitioned) counts every partition's tenure in
// the tenure metrics (and hand-offs as cause "handoff"), its renewal rounds
// as renew calls, join and leave as store calls, and exports besides:
//
//	leaderrun_partitions                      gauge: the number of partitions of the name
//	leaderrun_partitions_owned                gauge: partitions this process holds
//	leaderrun_partition_token{partition}      gauge: the fencing token of each partition held
//	leaderrun_partition_moves_total{direction} counter: partitions acquired (in) and given up (out)
//	leaderrun_reconcile_duration_seconds      histogram: time one reconcile took
//
// leaderrun_leading and leaderrun_token stay 0 there, and
// leaderrun_seconds_since_last_renew counts while it holds any partition.
package observe

import (
	"errors"
	"fmt"
	"log"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/lease"
)

// Store call results, the values of the result label.
const (
	resultOK    = "ok"
	resultHeld  = "held"
	resultLost  = "lost"
	resultError = "error"
)

// Tenure end causes, the values of the cause label.
const (
	causeLost     = "lost"
	causeDeadline = "deadline"
	causeReleased = "released"
	causeStepDown = "stepdown"
	causeHandoff  = "handoff"
	causeOther    = "other"
)

// renewBuckets cover store round-trips from 1 ms to 2 s.
var renewBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2}

// Observer holds one process's election state. It is safe for concurrent
// use; its methods do not block beyond a short mutex.
type Observer struct {
	name, holder  string
	renewDeadline time.Duration
	now           func() time.Time // replaced in tests
	errorLog      *log.Logger      // the HTTP server's; nil: the log package's default

	reg        *prometheus.Registry
	leadingG   prometheus.Gauge
	tokenG     prometheus.Gauge
	tenures    prometheus.Counter
	tenureEnds *prometheus.CounterVec
	storeCalls *prometheus.CounterVec
	renewTime  prometheus.Histogram
	childExits *prometheus.CounterVec
	health     *healthMetrics

	mu           sync.Mutex // guards the fields below and the leading and token gauges' values
	leader       string     // the leader last seen: this process, or the holder the store named
	leaderToken  int64
	leading      bool
	token        int64
	failing      bool      // no store answer since failingSince
	failingSince time.Time // New's time, or when the first failed call since the last answer was sent
	failedOp     string    // the op of the latest failed call; "" before any
	lastRenew    time.Time // last successful renew, or the tenure's start
	// lapsed is set when the last tenure ended while the store was
	// failing: sinceLastRenew keeps counting until a store call succeeds.
	lapsed bool

	// Partitioned mode (see Partitioned); parts is nil otherwise.
	parts    *partitionMetrics
	partView func() any    // the value of GET /partitions
	owned    map[int]int64 // the partitions held, with their tokens
}

// New returns an Observer for lease name as held by holder, with its own
// Prometheus registry. renewDeadline is the elector's RenewDeadline; it
// bounds how long the store may go unreached before Healthy turns false.
func New(name, holder string, renewDeadline time.Duration) *Observer {
	return newObserver(name, holder, renewDeadline, time.Now)
}

func newObserver(name, holder string, renewDeadline time.Duration, now func() time.Time) *Observer {
	labels := prometheus.Labels{"name": name}
	o := &Observer{
		name: name, holder: holder, renewDeadline: renewDeadline, now: now,
		reg: prometheus.NewRegistry(),
		leadingG: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "leaderrun_leading", ConstLabels: labels,
			Help: "1 while this process holds the lease, else 0.",
		}),
		tokenG: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "leaderrun_token", ConstLabels: labels,
			Help: "Fencing token of the current tenure; 0 on standby.",
		}),
		tenures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "leaderrun_tenures_total", ConstLabels: labels,
			Help: "Tenures started by this process.",
		}),
		tenureEnds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leaderrun_tenure_ends_total", ConstLabels: labels,
			Help: "Tenures ended, by cause (lost, deadline, released, stepdown, other).",
		}, []string{"cause"}),
		storeCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leaderrun_store_calls_total", ConstLabels: labels,
			Help: "Store calls by operation and result (ok, held, lost, error).",
		}, []string{"op", "result"}),
		renewTime: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "leaderrun_renew_duration_seconds", ConstLabels: labels,
			Help:    "Round-trip time of renew calls, whatever their outcome.",
			Buckets: renewBuckets,
		}),
		childExits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leaderrun_child_exits_total", ConstLabels: labels,
			Help: "Command exits by exit code (128+N for signal N).",
		}, []string{"code"}),
	}
	o.health = newHealthMetrics(labels)
	o.failing, o.failingSince = true, now()

	// Export every label value up front, so that rates start from zero.
	for _, op := range []string{"acquire", "renew", "release"} {
		for _, r := range []string{resultOK, resultHeld, resultLost, resultError} {
			o.storeCalls.WithLabelValues(op, r)
		}
	}
	for _, c := range []string{causeLost, causeDeadline, causeReleased, causeStepDown, causeOther} {
		o.tenureEnds.WithLabelValues(c)
	}

	o.reg.MustRegister(
		o.leadingG, o.tokenG, o.tenures, o.tenureEnds, o.storeCalls, o.renewTime, o.childExits,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "leaderrun_seconds_since_last_renew", ConstLabels: labels,
			Help: "While leading, seconds since the last successful renew (or since the tenure started); after a tenure that ended with the store unreachable, still counting until the store answers; else 0 on standby.",
		}, o.sinceLastRenew),
	)
	o.reg.MustRegister(o.health.collectors()...)
	o.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	)
	return o
}

// StoreCall records one store operation; its signature matches
// elect.Elector.Observe. op is "acquire", "renew" or "release". A nil err
// or a *lease.HeldError means the store answered; any other error is a
// failure to reach it or to get a definite answer, except that
// lease.ErrLost (counted as result "lost") is also an answer.
func (o *Observer) StoreCall(op string, took time.Duration, err error) {
	var held *lease.HeldError
	result := resultError
	switch {
	case err == nil:
		result = resultOK
	case errors.As(err, &held):
		result = resultHeld
	case errors.Is(err, lease.ErrLost):
		result = resultLost
	}
	o.storeCalls.WithLabelValues(op, result).Inc()
	if held != nil && !held.Record.Released {
		o.mu.Lock()
		o.leader, o.leaderToken = held.Record.Holder, held.Record.Token
		o.mu.Unlock()
	}
	if op == "renew" {
		o.renewTime.Observe(took.Seconds())
	}

	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	if result == resultError {
		if !o.failing {
			o.failing, o.failingSince = true, now.Add(-took)
		}
		o.failedOp = op
		return
	}
	o.failing, o.lapsed = false, false
	if op == "renew" && result == resultOK && (o.leading || len(o.owned) > 0) {
		o.lastRenew = now
	}
}

// Elected records the start of a tenure with fencing token token.
func (o *Observer) Elected(token int64) {
	o.tenures.Inc()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.leading = true
	o.token = token
	o.leader, o.leaderToken = o.holder, token
	o.lastRenew = o.now()
	o.leadingG.Set(1)
	o.tokenG.Set(float64(token))
}

// Ended records the end of the current tenure; cause is context.Cause of
// the tenure's context (lease.ErrLost, elect.ErrDeadline,
// elect.ErrReleased, or anything else, counted as "other"). It does
// nothing when no tenure is current, so a second call is harmless.
func (o *Observer) Ended(cause error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.leading {
		return
	}
	o.leading = false
	o.lapsed = o.failing
	o.token = 0
	o.leader, o.leaderToken = "", 0
	o.leadingG.Set(0)
	o.tokenG.Set(0)
	o.tenureEnds.WithLabelValues(causeLabel(cause)).Inc()
}

func causeLabel(cause error) string {
	switch {
	case errors.Is(cause, lease.ErrLost):
		return causeLost
	case errors.Is(cause, elect.ErrDeadline):
		return causeDeadline
	case errors.Is(cause, elect.ErrReleased):
		return causeReleased
	case errors.Is(cause, elect.ErrSteppedDown):
		return causeStepDown
	case errors.Is(cause, elect.ErrHandedOff):
		return causeHandoff
	default:
		return causeOther
	}
}

// ChildExited records the command's exit code (128+N for signal N).
func (o *Observer) ChildExited(code int) {
	o.childExits.WithLabelValues(fmt.Sprint(code)).Inc()
}

// Leading reports whether a tenure is current.
func (o *Observer) Leading() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.leading
}

// Healthy reports whether the store is being reached; see the package doc
// for the rule.
func (o *Observer) Healthy() bool {
	return o.unhealthy() == ""
}

// unhealthy returns why the process is unhealthy, or "" when it is not.
func (o *Observer) unhealthy() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.failing {
		return ""
	}
	since := o.now().Sub(o.failingSince)
	if since < o.renewDeadline {
		return ""
	}
	if o.failedOp == "" {
		return fmt.Sprintf("store not reached in the %s since start (renew deadline %s)",
			since.Round(100*time.Millisecond), o.renewDeadline)
	}
	return fmt.Sprintf("store not reached for %s (renew deadline %s); last %s failed",
		since.Round(100*time.Millisecond), o.renewDeadline, o.failedOp)
}

// sinceLastRenew is leaderrun_seconds_since_last_renew: it counts while
// leading, and goes on counting after a tenure that ended with the store
// unreachable, until a store call succeeds, so that an alert on it does not
// clear when things get worse.
func (o *Observer) sinceLastRenew() float64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !o.leading && len(o.owned) == 0 && !o.lapsed {
		return 0
	}
	return o.now().Sub(o.lastRenew).Seconds()
}

// leaderState is the body of GET /leader: the current leader as this
// replica last learned it (from its own tenure, or from the store on
// standby; empty while unknown), and this replica.
type leaderState struct {
	Name    string `json:"name"`
	Holder  string `json:"holder"` // the leader's identity
	Token   int64  `json:"token"`  // the leader's fencing token
	Leading bool   `json:"leading"`
	Self    string `json:"self"` // this replica's identity
}

func (o *Observer) state() leaderState {
	o.mu.Lock()
	defer o.mu.Unlock()
	return leaderState{Name: o.name, Holder: o.leader, Token: o.leaderToken, Leading: o.leading, Self: o.holder}
}

// SetLogger makes the HTTP server report its own errors (a client that
// hung up, a malformed request) through logger, at warning level, so that
// they are formatted like leaderrun's other lines.
func (o *Observer) SetLogger(logger *slog.Logger) {
	o.errorLog = slog.NewLogLogger(logger.Handler(), slog.LevelWarn)
}
