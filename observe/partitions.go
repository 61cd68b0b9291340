package observe

import (
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// reconcileBuckets cover a reconcile from 100 µs (nothing to do) to 10 s
// (acquisitions against a slow store).
var reconcileBuckets = []float64{.0001, .001, .005, .01, .05, .1, .5, 1, 5, 10}

// partitionMetrics are the metrics of a replica run with --partitions.
type partitionMetrics struct {
	owned     prometheus.Gauge
	tokens    *prometheus.GaugeVec
	moves     *prometheus.CounterVec
	reconcile prometheus.Histogram
}

// Partitioned makes o a partitioned replica's (--partitions n): it exports
// the partition metrics, and serves GET /partitions with view's value as
// JSON in place of /leader. Call it before Serve or Handler.
func (o *Observer) Partitioned(n int, view func() any) {
	labels := prometheus.Labels{"name": o.name}
	m := &partitionMetrics{
		owned: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "leaderrun_partitions_owned", ConstLabels: labels,
			Help: "Partitions this process holds.",
		}),
		tokens: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "leaderrun_partition_token", ConstLabels: labels,
			Help: "Fencing token of each partition this process holds; absent for the others.",
		}, []string{"partition"}),
		moves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "leaderrun_partition_moves_total", ConstLabels: labels,
			Help: "Partitions acquired (in) and given up for any cause (out) by this process.",
		}, []string{"direction"}),
		reconcile: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "leaderrun_reconcile_duration_seconds", ConstLabels: labels,
			Help:    "Time one reconcile of the partitions held with the target took, acquisitions included.",
			Buckets: reconcileBuckets,
		}),
	}
	m.moves.WithLabelValues("in")
	m.moves.WithLabelValues("out")
	o.tenureEnds.WithLabelValues(causeHandoff)
	for _, op := range []string{"join", "leave"} {
		for _, r := range []string{resultOK, resultHeld, resultLost, resultError} {
			o.storeCalls.WithLabelValues(op, r)
		}
	}
	o.reg.MustRegister(m.owned, m.tokens, m.moves, m.reconcile,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "leaderrun_partitions", ConstLabels: labels,
			Help: "The number of partitions of the name (--partitions).",
		}, func() float64 { return float64(n) }))
	o.mu.Lock()
	defer o.mu.Unlock()
	o.parts, o.partView, o.owned = m, view, map[int]int64{}
}

// PartitionStarted records the start of partition p's tenure with fencing
// token token.
func (o *Observer) PartitionStarted(p int, token int64) {
	o.tenures.Inc()
	o.mu.Lock()
	defer o.mu.Unlock()
	if len(o.owned) == 0 {
		o.lastRenew = o.now()
	}
	o.owned[p] = token
	o.parts.owned.Set(float64(len(o.owned)))
	o.parts.tokens.WithLabelValues(strconv.Itoa(p)).Set(float64(token))
	o.parts.moves.WithLabelValues("in").Inc()
}

// PartitionEnded records the end of partition p's tenure; cause is as
// Ended's (elect.ErrHandedOff counts as "handoff").
func (o *Observer) PartitionEnded(p int, cause error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, ok := o.owned[p]; !ok {
		return
	}
	delete(o.owned, p)
	o.lapsed = len(o.owned) == 0 && o.failing
	o.parts.owned.Set(float64(len(o.owned)))
	o.parts.tokens.DeleteLabelValues(strconv.Itoa(p))
	o.parts.moves.WithLabelValues("out").Inc()
	o.tenureEnds.WithLabelValues(causeLabel(cause)).Inc()
}

// Reconciled records how long one reconcile took.
func (o *Observer) Reconciled(took time.Duration) {
	o.parts.reconcile.Observe(took.Seconds())
}

// Owned reports how many partitions the process holds.
func (o *Observer) Owned() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.owned)
}

// Routes names the routes that tell who holds what: /leader, or
// /partitions once Partitioned.
func (o *Observer) Routes() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.partView != nil {
		return "/partitions"
	}
	return "/leader"
}
