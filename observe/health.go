package observe

import "github.com/prometheus/client_golang/prometheus"

// healthMetrics count what the command's health check did (--health-cmd).
type healthMetrics struct {
	checks, failures, handovers, restarts prometheus.Counter
}

func newHealthMetrics(labels prometheus.Labels) *healthMetrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, ConstLabels: labels, Help: help})
	}
	return &healthMetrics{
		checks:    counter("leaderrun_health_checks_total", "Health checks of the command run to their end (--health-cmd)."),
		failures:  counter("leaderrun_health_check_failures_total", "Health checks that failed: a non-zero exit, a timeout, or a check that could not start."),
		handovers: counter("leaderrun_health_handovers_total", "Hand-overs of the name to another replica because the command was unhealthy."),
		restarts:  counter("leaderrun_health_restarts_total", "Restarts of an unhealthy command because no other replica was live and eligible."),
	}
}

func (h *healthMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{h.checks, h.failures, h.handovers, h.restarts}
}

// HealthCheck records a health check that ran to its end, and whether it
// passed.
func (o *Observer) HealthCheck(ok bool) {
	o.health.checks.Inc()
	if !ok {
		o.health.failures.Inc()
	}
}

// HealthHandover records a hand-over of the name for the command's health.
func (o *Observer) HealthHandover() { o.health.handovers.Inc() }

// HealthRestart records a restart of the unhealthy command in place of a
// hand-over.
func (o *Observer) HealthRestart() { o.health.restarts.Inc() }
