// Package config turns leaderrun's options into a validated Config. It
// applies the defaults of the timing model and reports every bad option at
// once, each naming the option and why it is wrong.
package config

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Defaults of the timing model (docs/design.md §2). RenewDeadline defaults to
// LeaseDuration − KillGrace − Margin.
const (
	DefaultLeaseDuration = 15 * time.Second
	DefaultRetryPeriod   = 2 * time.Second
	DefaultKillGrace     = 5 * time.Second
	DefaultMargin        = 2 * time.Second
	DefaultRestartDelay  = 1 * time.Second

	// minMargin is the least slack validation accepts between the end of
	// a kill and the store's expiry.
	minMargin = time.Second
)

// Bound is the range an option's duration must lie in.
type Bound struct {
	Min, Max time.Duration
}

// Bounds are the documented ranges of the duration options, by option
// name. Outside them an option is refused (exit 125): a renew interval of
// a nanosecond busy-loops against the store, a TTL of years overflows the
// deadline arithmetic.
var Bounds = map[string]Bound{
	"--ttl":             {time.Second, 24 * time.Hour},
	"--renew-interval":  {10 * time.Millisecond, time.Hour},
	"--renew-deadline":  {10 * time.Millisecond, 24 * time.Hour},
	"--kill-grace":      {10 * time.Millisecond, time.Hour},
	"--restart-delay":   {0, time.Hour},
	"--acquire-timeout": {0, 365 * 24 * time.Hour},
	"--hold-at-least":   {0, 24 * time.Hour},

	"--reconcile-interval": {100 * time.Millisecond, time.Hour},
	"--reconcile-timeout":  {time.Second, 24 * time.Hour},

	"--health-interval":     {100 * time.Millisecond, 24 * time.Hour},
	"--health-timeout":      {10 * time.Millisecond, 24 * time.Hour},
	"--health-start-period": {0, 24 * time.Hour},
	"--health-cooldown":     {0, 7 * 24 * time.Hour},
	"--preempt-delay":       {0, 24 * time.Hour},
}

// MaxPartitions bounds --partitions (lease.MaxPartitions): beyond a few
// thousand, one child per partition is the wrong shape for the work.
const MaxPartitions = 4096

// CheckBound refuses a duration of option outside Bounds.
func CheckBound(option string, d time.Duration) error {
	b, ok := Bounds[option]
	if !ok || (d >= b.Min && d <= b.Max) {
		return nil
	}
	return &FieldError{Option: option, Value: d.String(), Reason: fmt.Sprintf("must be from %v to %v", b.Min, b.Max)}
}

// Timing holds the durations of the timing model. Zero fields take their
// defaults in Normalize.
type Timing struct {
	LeaseDuration time.Duration // --ttl: the TTL the store writes
	RenewDeadline time.Duration // --renew-deadline: how long trust lasts after a renew is sent
	RetryPeriod   time.Duration // --renew-interval: from one renew attempt's start to the next
	KillGrace     time.Duration // --kill-grace: stop signal → SIGKILL

	// derived records that Normalize computed RenewDeadline, so that
	// Validate blames the options the user did set.
	derived bool
}

// Config is everything leaderrun needs to run one command under a lease.
type Config struct {
	Name     string
	Store    string // DSN; empty means this user's SQLite file on this host
	Identity string // empty means host, pid and a random part
	Timing
	Once           bool
	HoldAtLeast    time.Duration // keep the lease at least this long after acquiring it; 0: release at once
	AcquireTimeout time.Duration // 0: wait for ever
	RestartDelay   time.Duration // before campaigning again after the child exited
	Command        []string

	// Partitions is --partitions: 0 for one name, else the number of
	// partitions of the name, one command per partition this replica
	// owns.
	Partitions        int
	ReconcileInterval time.Duration // 0: elect.DefaultReconcileInterval
	ReconcileTimeout  time.Duration // 0: elect.DefaultReconcileTimeout

	// Health is the command's health check (--health-*); none when its
	// Cmd is empty.
	Health Health
	// Priority is --priority: higher leads; it must fit a 32-bit
	// integer (Validate).
	Priority int64
	// Preempt is --preempt: take the name over from a leader of lower
	// priority once this replica has been a candidate for PreemptDelay.
	Preempt      bool
	PreemptDelay time.Duration
}

// FieldError says what is wrong with one option.
type FieldError struct {
	Option string // as the user spells it: "--ttl"
	Value  string
	Reason string
}

func (e *FieldError) Error() string {
	if e.Value == "" {
		return fmt.Sprintf("%s: %s", e.Option, e.Reason)
	}
	return fmt.Sprintf("%s %s: %s", e.Option, e.Value, e.Reason)
}

// Normalize fills in defaults for zero durations. A zero RenewDeadline is
// derived from the TTL, the kill grace and the margin, and a zero
// RetryPeriod from the deadline, so that setting only --ttl keeps the model
// safe.
func (t *Timing) Normalize() {
	if t.LeaseDuration == 0 {
		t.LeaseDuration = DefaultLeaseDuration
	}
	if t.KillGrace == 0 {
		t.KillGrace = DefaultKillGrace
	}
	if t.RenewDeadline == 0 {
		t.RenewDeadline = t.LeaseDuration - t.KillGrace - DerivedMargin(t.LeaseDuration)
		t.derived = true
	}
	if t.RetryPeriod == 0 {
		// Four renew attempts fit in the deadline, as with the defaults.
		t.RetryPeriod = DefaultRetryPeriod
		if t.RenewDeadline > 0 {
			t.RetryPeriod = min(DefaultRetryPeriod, t.RenewDeadline/4)
		}
	}
}

// DerivedMargin is the safety margin a derived --renew-deadline leaves
// below the TTL: DefaultMargin (2s), and minMargin (1s) for a TTL shorter
// than the default, so that short leases (tests, benchmarks) keep a
// deadline at all.
func DerivedMargin(ttl time.Duration) time.Duration {
	if ttl < DefaultLeaseDuration {
		return minMargin
	}
	return DefaultMargin
}

// minDerivedDeadline is the shortest derived renew deadline: four renew
// attempts of the shortest --renew-interval fit in it.
var minDerivedDeadline = 4 * Bounds["--renew-interval"].Min

// MinLeaseDuration is the shortest --ttl that leaves a derived renew
// deadline with killGrace: killGrace + 1s + 40ms.
func MinLeaseDuration(killGrace time.Duration) time.Duration {
	return killGrace + minMargin + minDerivedDeadline
}

// Validate checks the timing model: every duration positive, renewals more
// frequent than the deadline, and deadline + kill grace + 1s within the TTL,
// so a lost leader's child is dead before the store lets another take over.
func (t Timing) Validate() error {
	var errs []error
	bad := func(opt string, v time.Duration, format string, args ...any) {
		errs = append(errs, &FieldError{Option: opt, Value: v.String(), Reason: fmt.Sprintf(format, args...)})
	}
	positive := []struct {
		opt string
		v   time.Duration
	}{
		{"--ttl", t.LeaseDuration}, {"--renew-interval", t.RetryPeriod}, {"--kill-grace", t.KillGrace},
	}
	if !t.derived {
		positive = append(positive, struct {
			opt string
			v   time.Duration
		}{"--renew-deadline", t.RenewDeadline})
	}
	for _, p := range positive {
		if p.v <= 0 {
			bad(p.opt, p.v, "must be positive")
		}
	}
	if t.derived && t.RenewDeadline < minDerivedDeadline && t.LeaseDuration > 0 && t.KillGrace > 0 {
		bad("--ttl", t.LeaseDuration, "leaves no renew deadline: a lease must last the renew deadline (at least %v), then --kill-grace (%v) while a lost leader's command stops, then the %v safety margin, so with --kill-grace %v, --ttl must be at least %v; raise --ttl or lower --kill-grace",
			minDerivedDeadline, t.KillGrace, DerivedMargin(t.LeaseDuration), t.KillGrace, MinLeaseDuration(t.KillGrace).Truncate(time.Second)+time.Second)
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, p := range []struct {
		opt string
		v   time.Duration
	}{{"--ttl", t.LeaseDuration}, {"--renew-interval", t.RetryPeriod}, {"--renew-deadline", t.RenewDeadline}, {"--kill-grace", t.KillGrace}} {
		if err := CheckBound(p.opt, p.v); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	if t.RetryPeriod >= t.RenewDeadline {
		bad("--renew-interval", t.RetryPeriod, "must be shorter than --renew-deadline (%v), or no renewal fits before trust ends", t.RenewDeadline)
	}
	if need := t.RenewDeadline + t.KillGrace + minMargin; need > t.LeaseDuration {
		bad("--ttl", t.LeaseDuration, "must be at least --renew-deadline + --kill-grace + 1s = %v + %v + 1s = %v, or a lost leader's child could still run when another replica takes over", t.RenewDeadline, t.KillGrace, need)
	}
	return errors.Join(errs...)
}

// Validate normalizes c's timing and checks every field. It returns all
// problems joined, one *FieldError each.
func (c *Config) Validate() error {
	c.Timing.Normalize()
	var errs []error
	if err := ValidateName(c.Name); err != nil {
		errs = append(errs, err)
	}
	if err := c.Timing.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := CheckBound("--acquire-timeout", c.AcquireTimeout); err != nil {
		errs = append(errs, err)
	}
	if err := CheckBound("--restart-delay", c.RestartDelay); err != nil {
		errs = append(errs, err)
	}
	if err := CheckBound("--hold-at-least", c.HoldAtLeast); err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.validatePartitions()...)
	errs = append(errs, c.validateHealth()...)
	if c.Identity != "" {
		if err := ValidateIdentity(c.Identity); err != nil {
			errs = append(errs, err)
		}
	}
	if len(c.Command) == 0 || c.Command[0] == "" {
		errs = append(errs, &FieldError{Option: "COMMAND", Reason: "missing: give the program to run after --, as in: leaderrun --name relay -- ./relay"})
	}
	return errors.Join(errs...)
}

// validatePartitions checks --partitions and the options that go with it,
// or that make no sense with it.
func (c *Config) validatePartitions() []error {
	var errs []error
	if c.Partitions == 0 {
		for _, o := range []struct {
			opt string
			v   time.Duration
		}{{"--reconcile-interval", c.ReconcileInterval}, {"--reconcile-timeout", c.ReconcileTimeout}} {
			if o.v != 0 {
				errs = append(errs, &FieldError{Option: o.opt, Value: o.v.String(), Reason: "applies to --partitions only"})
			}
		}
		return errs
	}
	if c.Partitions < 1 || c.Partitions > MaxPartitions {
		errs = append(errs, &FieldError{Option: "--partitions", Value: fmt.Sprint(c.Partitions),
			Reason: fmt.Sprintf("must be from 1 to %d", MaxPartitions)})
	}
	// Partitioned work runs until leaderrun is stopped: each of these
	// ends or shapes a single tenure.
	without := func(opt, why string) {
		errs = append(errs, &FieldError{Option: opt, Reason: "cannot be used with --partitions: " + why})
	}
	if c.Once {
		without("--once", "partitioned work runs until leaderrun is stopped; for one-off work use a name without partitions")
	}
	if c.AcquireTimeout != 0 {
		without("--acquire-timeout", "a replica may rightly own no partition (more replicas than partitions) and waits as a member")
	}
	if c.HoldAtLeast != 0 {
		without("--hold-at-least", "partitions move between replicas as they come and go")
	}
	// Health and priority choose the one replica that runs a name's
	// command; a partition's owner is the rendezvous target, which they
	// do not weigh (yet).
	if c.Health.Cmd != "" {
		without("--health-cmd", NoHealthWithPartitions)
	}
	if c.Priority != 0 {
		without("--priority", NoHealthWithPartitions)
	}
	if c.Preempt {
		without("--preempt", NoHealthWithPartitions)
	}
	for _, o := range []struct {
		opt string
		v   time.Duration
	}{{"--reconcile-interval", c.ReconcileInterval}, {"--reconcile-timeout", c.ReconcileTimeout}} {
		if o.v != 0 {
			if err := CheckBound(o.opt, o.v); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if c.ReconcileTimeout != 0 && c.ReconcileTimeout <= c.KillGrace {
		errs = append(errs, &FieldError{Option: "--reconcile-timeout", Value: c.ReconcileTimeout.String(),
			Reason: fmt.Sprintf("must be longer than --kill-grace (%v): a hand-off may take that long", c.KillGrace)})
	}
	return errs
}

// MaxNameLen bounds a lease name.
const MaxNameLen = 200

// ValidateName checks a lease name: 1 to MaxNameLen bytes of valid UTF-8,
// printable, without spaces (a partition's lease name has one, so that it
// never collides with a name).
func ValidateName(name string) error {
	switch {
	case name == "":
		return &FieldError{Option: "--name", Reason: "required: the name of the lease every replica campaigns for"}
	case !utf8.ValidString(name):
		return &FieldError{"--name", fmt.Sprintf("%q", name), "must be valid UTF-8"}
	case len(name) > MaxNameLen:
		return &FieldError{"--name", fmt.Sprintf("%q", truncate(name, 20)), fmt.Sprintf("longer than %d bytes", MaxNameLen)}
	case strings.IndexFunc(name, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0:
		return &FieldError{"--name", fmt.Sprintf("%q", name), "must not contain spaces or control characters"}
	}
	return nil
}

// ValidateIdentity checks a holder identity (--identity, --to): what the
// store accepts (lease.CheckIdentity: 1 to 200 bytes of valid UTF-8 without
// control characters), so that no status line can be forged with it, and
// without spaces, as a name, so that it can be written unquoted.
func ValidateIdentity(id string) error {
	switch {
	case !utf8.ValidString(id):
		return &FieldError{"--identity", fmt.Sprintf("%q", id), "must be valid UTF-8"}
	case len(id) > MaxNameLen:
		return &FieldError{"--identity", fmt.Sprintf("%q", truncate(id, 20)), fmt.Sprintf("longer than %d bytes", MaxNameLen)}
	case id == "":
		return &FieldError{"--identity", `""`, "empty: leave the option out for host:pid:random"}
	case strings.IndexFunc(id, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0:
		return &FieldError{"--identity", fmt.Sprintf("%q", id), "must not contain spaces or control characters, as --name"}
	}
	return nil
}

// truncate returns at most n bytes of s, cut at a rune boundary, and "…".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
