package config

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

func TestNormalizeDefaults(t *testing.T) {
	var tm Timing
	tm.Normalize()
	want := Timing{LeaseDuration: 15 * time.Second, RenewDeadline: 8 * time.Second, RetryPeriod: 2 * time.Second, KillGrace: 5 * time.Second, derived: true}
	if tm != want {
		t.Errorf("Normalize() = %+v, want %+v", tm, want)
	}
	if err := tm.Validate(); err != nil {
		t.Errorf("defaults do not validate: %v", err)
	}
}

func TestNormalizeShortTTL(t *testing.T) {
	tm := Timing{LeaseDuration: 3 * time.Second, KillGrace: time.Second}
	tm.Normalize()
	if got, want := tm.RenewDeadline, time.Second; got != want {
		t.Errorf("RenewDeadline = %v, want %v", got, want)
	}
	if got, want := tm.RetryPeriod, 250*time.Millisecond; got != want {
		t.Errorf("RetryPeriod = %v, want %v", got, want)
	}
	if err := tm.Validate(); err != nil {
		t.Errorf("Validate: %v", err)
	}
}

// TestDerivedTimings pins the derived deadline and interval that the help
// and README state (issue 37.9): ttl − kill grace − 2s, or − 1s under 15s.
func TestDerivedTimings(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct{ ttl, deadline, interval time.Duration }{
		{15 * time.Second, 8 * time.Second, 2 * time.Second},
		{10 * time.Second, 4 * time.Second, time.Second},
		{6500 * ms, 500 * ms, 125 * ms},
		{6040 * ms, 40 * ms, 10 * ms},
		{time.Minute, 53 * time.Second, 2 * time.Second},
	} {
		tm := Timing{LeaseDuration: tc.ttl}
		tm.Normalize()
		if tm.RenewDeadline != tc.deadline || tm.RetryPeriod != tc.interval {
			t.Errorf("--ttl %v: deadline %v, interval %v; want %v, %v", tc.ttl, tm.RenewDeadline, tm.RetryPeriod, tc.deadline, tc.interval)
		}
		if err := tm.Validate(); err != nil {
			t.Errorf("--ttl %v: %v", tc.ttl, err)
		}
	}
	tm := Timing{LeaseDuration: 6 * time.Second}
	tm.Normalize()
	err := tm.Validate()
	if err == nil || !strings.Contains(err.Error(), "--ttl must be at least 7s") {
		t.Errorf("--ttl 6s: %v, want the least --ttl named", err)
	}
}

func TestValidateTiming(t *testing.T) {
	s := time.Second
	tests := []struct {
		name    string
		timing  Timing
		options []string // every option the error must name; none means valid
	}{
		{"defaults", Timing{}, nil},
		{"explicit valid", Timing{LeaseDuration: 10 * s, RenewDeadline: 4 * s, RetryPeriod: s, KillGrace: 5 * s}, nil},
		{"exactly one second of margin", Timing{LeaseDuration: 10 * s, RenewDeadline: 4 * s, RetryPeriod: s, KillGrace: 5 * s}, nil},
		{"renew interval equals deadline", Timing{RenewDeadline: 2 * s, RetryPeriod: 2 * s}, []string{"--renew-interval"}},
		{"renew interval above deadline", Timing{RenewDeadline: 3 * s, RetryPeriod: 5 * s}, []string{"--renew-interval"}},
		{"deadline plus grace too long", Timing{RenewDeadline: 10 * s}, []string{"--ttl"}},
		{"ttl too short for defaults", Timing{LeaseDuration: 4 * s}, []string{"--ttl 4s: leaves no renew deadline"}},
		{"explicit negative deadline", Timing{RenewDeadline: -s}, []string{"--renew-deadline"}},
		{"negative grace", Timing{KillGrace: -s}, []string{"--kill-grace"}},
		{"negative ttl and interval", Timing{LeaseDuration: -s, RetryPeriod: -s}, []string{"--ttl", "--renew-interval"}},
		{"two rules broken", Timing{LeaseDuration: 6 * s, RenewDeadline: 3 * s, RetryPeriod: 3 * s, KillGrace: 5 * s}, []string{"--renew-interval", "--ttl"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tm := tc.timing
			tm.Normalize()
			err := tm.Validate()
			if len(tc.options) == 0 {
				if err != nil {
					t.Fatalf("Validate(%+v) = %v, want nil", tm, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("Validate(%+v) = nil, want an error naming %v", tm, tc.options)
			}
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Errorf("error %v holds no *FieldError", err)
			}
			for _, opt := range tc.options {
				if !strings.Contains(err.Error(), opt) {
					t.Errorf("error %q does not name %s", err, opt)
				}
			}
		})
	}
}

func TestValidateConfig(t *testing.T) {
	valid := func() Config { return Config{Name: "relay", Command: []string{"./relay"}} }
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string // substring of the error; empty means valid
	}{
		{"valid", func(*Config) {}, ""},
		{"no name", func(c *Config) { c.Name = "" }, "--name: required"},
		{"name with space", func(c *Config) { c.Name = "a b" }, "--name"},
		{"name too long", func(c *Config) { c.Name = strings.Repeat("x", MaxNameLen+1) }, "longer than"},
		{"no command", func(c *Config) { c.Command = nil }, "COMMAND: missing"},
		{"empty command", func(c *Config) { c.Command = []string{""} }, "COMMAND: missing"},
		{"negative acquire timeout", func(c *Config) { c.AcquireTimeout = -time.Second }, "--acquire-timeout"},
		{"negative restart delay", func(c *Config) { c.RestartDelay = -time.Second }, "--restart-delay"},
		{"partitions", func(c *Config) { c.Partitions = 16 }, ""},
		{"the most partitions", func(c *Config) { c.Partitions = MaxPartitions }, ""},
		{"negative partitions", func(c *Config) { c.Partitions = -1 }, "--partitions -1: must be from 1 to 4096"},
		{"too many partitions", func(c *Config) { c.Partitions = MaxPartitions + 1 }, "--partitions 4097"},
		{"partitions once", func(c *Config) { c.Partitions, c.Once = 4, true }, "--once: cannot be used with --partitions"},
		{"partitions acquire timeout", func(c *Config) { c.Partitions, c.AcquireTimeout = 4, time.Second }, "--acquire-timeout: cannot be used with --partitions"},
		{"partitions hold", func(c *Config) { c.Partitions, c.HoldAtLeast = 4, time.Hour }, "--hold-at-least: cannot be used with --partitions"},
		{"reconcile interval alone", func(c *Config) { c.ReconcileInterval = time.Second }, "--reconcile-interval 1s: applies to --partitions only"},
		{"reconcile timeout alone", func(c *Config) { c.ReconcileTimeout = time.Minute }, "--reconcile-timeout 1m0s: applies to --partitions only"},
		{"reconcile interval", func(c *Config) { c.Partitions, c.ReconcileInterval = 4, time.Second }, ""},
		{"reconcile interval too short", func(c *Config) { c.Partitions, c.ReconcileInterval = 4, time.Millisecond }, "--reconcile-interval 1ms: must be from"},
		{"reconcile timeout within the kill grace", func(c *Config) { c.Partitions, c.ReconcileTimeout = 4, 5*time.Second }, "--reconcile-timeout 5s: must be longer than --kill-grace"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.mutate(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	c := Config{Timing: Timing{KillGrace: -time.Second}}
	err := c.Validate()
	for _, want := range []string{"--name", "--kill-grace", "COMMAND"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate() = %v, want it to name %s", err, want)
		}
	}
}

func TestBounds(t *testing.T) {
	tests := []struct {
		name   string
		cfg    Config
		option string // the option the error must name; "" means valid
	}{
		{"renew interval of a nanosecond", Config{Timing: Timing{RetryPeriod: time.Nanosecond}}, "--renew-interval"},
		{"a ttl of years", Config{Timing: Timing{LeaseDuration: 100000 * time.Hour}}, "--ttl"},
		{"a kill grace of a nanosecond", Config{Timing: Timing{KillGrace: time.Nanosecond}}, "--kill-grace"},
		{"a restart delay of two hours", Config{RestartDelay: 2 * time.Hour}, "--restart-delay"},
		{"a negative restart delay", Config{RestartDelay: -time.Second}, "--restart-delay"},
		{"no restart delay", Config{RestartDelay: 0}, ""},
		{"a negative acquire timeout", Config{AcquireTimeout: -time.Second}, "--acquire-timeout"},
		{"an identity with a newline", Config{Identity: "a\nb"}, "--identity"},
		{"an identity that is not UTF-8", Config{Identity: "a\xffb"}, "--identity"},
		{"an identity of 6000 bytes", Config{Identity: strings.Repeat("x", 6000)}, "--identity"},
		{"a name that is not UTF-8", Config{Name: "relay\xff"}, "--name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.cfg
			if c.Name == "" {
				c.Name = "relay"
			}
			c.Command = []string{"cmd"}
			err := c.Validate()
			switch {
			case tc.option == "" && err != nil:
				t.Errorf("Validate = %v, want nil", err)
			case tc.option != "" && (err == nil || !strings.Contains(err.Error(), tc.option)):
				t.Errorf("Validate = %v, want an error naming %s", err, tc.option)
			}
		})
	}
}

func TestMaxPartitionsIsTheStores(t *testing.T) {
	if MaxPartitions != lease.MaxPartitions {
		t.Errorf("config.MaxPartitions = %d, lease.MaxPartitions = %d: --partitions would promise what stores refuse", MaxPartitions, lease.MaxPartitions)
	}
}
