package config

import (
	"fmt"
	"math"
	"time"
)

// Defaults of the health check (Docker's HEALTHCHECK) and of preemption.
const (
	DefaultHealthInterval = 10 * time.Second
	DefaultHealthTimeout  = 5 * time.Second
	DefaultHealthRetries  = 3
	DefaultHealthCooldown = 5 * time.Minute
	DefaultPreemptDelay   = 30 * time.Second

	// MaxHealthRetries bounds --health-retries.
	MaxHealthRetries = 1000
)

// NoHealthWithPartitions is why the health and priority options are
// refused with --partitions.
const NoHealthWithPartitions = "health checks and priorities choose the one replica that runs a name's command; a partition goes to the replica the balanced target names, which they do not weigh"

// Health is the command's health check, with Docker's names and meanings:
// while the leader's command runs (after StartPeriod from its start), Cmd
// runs with /bin/sh -c every Interval, for at most Timeout; after Retries
// failures in a row the command is unhealthy, and the leader hands the
// name over to a live eligible candidate and is itself ineligible for
// Cooldown, or, with none, restarts its command.
type Health struct {
	Cmd         string        // --health-cmd; empty: no check
	Interval    time.Duration // --health-interval
	Timeout     time.Duration // --health-timeout
	Retries     int           // --health-retries
	StartPeriod time.Duration // --health-start-period
	Cooldown    time.Duration // --health-cooldown
}

// DefaultHealth is the check of cmd with the default timings.
func DefaultHealth(cmd string) Health {
	return Health{Cmd: cmd, Interval: DefaultHealthInterval, Timeout: DefaultHealthTimeout,
		Retries: DefaultHealthRetries, Cooldown: DefaultHealthCooldown}
}

// validateHealth checks --health-* (when a check is given), --priority and
// --preempt-delay.
func (c *Config) validateHealth() []error {
	var errs []error
	if c.Priority < math.MinInt32 || c.Priority > math.MaxInt32 {
		errs = append(errs, &FieldError{Option: "--priority", Value: fmt.Sprint(c.Priority),
			Reason: fmt.Sprintf("must be from %d to %d (a 32-bit integer)", math.MinInt32, math.MaxInt32)})
	}
	if err := CheckBound("--preempt-delay", c.PreemptDelay); err != nil {
		errs = append(errs, err)
	}
	h := c.Health
	if h.Cmd == "" {
		return errs
	}
	for _, o := range []struct {
		opt string
		v   time.Duration
	}{{"--health-interval", h.Interval}, {"--health-timeout", h.Timeout}, {"--health-start-period", h.StartPeriod}, {"--health-cooldown", h.Cooldown}} {
		if err := CheckBound(o.opt, o.v); err != nil {
			errs = append(errs, err)
		}
	}
	if h.Retries < 1 || h.Retries > MaxHealthRetries {
		errs = append(errs, &FieldError{Option: "--health-retries", Value: fmt.Sprint(h.Retries),
			Reason: fmt.Sprintf("must be from 1 to %d: the failures in a row that make the command unhealthy", MaxHealthRetries)})
	}
	if h.Timeout > h.Interval && h.Interval > 0 {
		errs = append(errs, &FieldError{Option: "--health-timeout", Value: h.Timeout.String(),
			Reason: fmt.Sprintf("must not exceed --health-interval (%v): one check ends before the next begins", h.Interval)})
	}
	return errs
}
