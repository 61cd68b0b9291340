package config

import (
	"strings"
	"testing"
	"time"
)

func TestValidateHealthAndPriority(t *testing.T) {
	valid := func() Config {
		return Config{Name: "relay", Command: []string{"./relay"}, PreemptDelay: DefaultPreemptDelay}
	}
	tests := []struct {
		name   string
		mutate func(*Config)
		want   string // substring of the error; empty means valid
	}{
		{"no check", func(*Config) {}, ""},
		{"a check", func(c *Config) { c.Health = DefaultHealth("true") }, ""},
		{"no retries", func(c *Config) { c.Health = DefaultHealth("true"); c.Health.Retries = 0 }, "--health-retries 0: must be from 1 to 1000"},
		{"timeout over the interval", func(c *Config) { c.Health = DefaultHealth("true"); c.Health.Timeout = 11 * time.Second },
			"--health-timeout 11s: must not exceed --health-interval (10s)"},
		{"timeout equal to the interval", func(c *Config) { c.Health = DefaultHealth("true"); c.Health.Timeout = c.Health.Interval }, ""},
		{"negative cooldown", func(c *Config) { c.Health = DefaultHealth("true"); c.Health.Cooldown = -time.Minute }, "--health-cooldown -1m0s: must be from 0s"},
		{"zero cooldown", func(c *Config) { c.Health = DefaultHealth("true"); c.Health.Cooldown = 0 }, ""},
		{"negative start period", func(c *Config) { c.Health = DefaultHealth("true"); c.Health.StartPeriod = -time.Second }, "--health-start-period"},
		{"highest priority", func(c *Config) { c.Priority = 1<<31 - 1 }, ""},
		{"lowest priority", func(c *Config) { c.Priority = -1 << 31 }, ""},
		{"priority over 32 bits", func(c *Config) { c.Priority = 1 << 31 }, "--priority 2147483648: must be from -2147483648 to 2147483647"},
		{"priority under 32 bits", func(c *Config) { c.Priority = -1<<31 - 1 }, "--priority -2147483649"},
		{"negative preempt delay", func(c *Config) { c.Preempt, c.PreemptDelay = true, -time.Second }, "--preempt-delay -1s: must be from 0s"},
		{"check with partitions", func(c *Config) { c.Partitions = 4; c.Health = DefaultHealth("true") }, "--health-cmd: cannot be used with --partitions"},
		{"priority with partitions", func(c *Config) { c.Partitions, c.Priority = 4, 3 }, "--priority: cannot be used with --partitions"},
		{"preempt with partitions", func(c *Config) { c.Partitions, c.Preempt = 4, true }, "--preempt: cannot be used with --partitions"},
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
