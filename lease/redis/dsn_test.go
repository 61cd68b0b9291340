package redis

import (
	"testing"

	"github.com/leaderrun/leaderrun/lease"
)

func TestSplitDSN(t *testing.T) {
	tests := []struct {
		dsn, want string
		prefix    string
		wait      int
		retries   bool
	}{
		{"redis://h:6379/0", "redis://h:6379/0", DefaultPrefix, 0, false},
		{"rediss://u:p%40ss@h/1?leaderrun_prefix=app.lr&dial_timeout=2s", "rediss://u:p%40ss@h/1?dial_timeout=2s", "app.lr", 0, false},
		{"redis://h/0?leaderrun_wait_replicas=1&max_retries=2", "redis://h/0?max_retries=2", DefaultPrefix, 1, true},
		{"redis://u:a%2Fb%3Ac%40d@h/0", "redis://u:a%2Fb%3Ac%40d@h/0", DefaultPrefix, 0, false},
	}
	for _, tt := range tests {
		got, opts, err := splitDSN(tt.dsn)
		if err != nil {
			t.Errorf("splitDSN(%q): %v", tt.dsn, err)
			continue
		}
		if got != tt.want || opts.prefix != tt.prefix || opts.waitReplicas != tt.wait || opts.retriesSet != tt.retries {
			t.Errorf("splitDSN(%q) = %q, %+v; want %q, prefix %q, wait %d, retries set %v",
				tt.dsn, got, opts, tt.want, tt.prefix, tt.wait, tt.retries)
		}
	}
}

func TestRedact(t *testing.T) {
	tests := []struct{ dsn, want string }{
		{"redis://u:" + secret + "@h:6379/0", "redis://u@h:6379/0"},
		{"rediss://:" + secret + "@h/0?leaderrun_prefix=x", "rediss://h/0?leaderrun_prefix=x"},
		{"redis://u:p%40ss%2F" + secret + "@h/0", "redis://u@h/0"},
		{"redis://u:p@ss:w/rd" + secret + "@h/0", "redis://…"},
		{"redis://u:x@" + secret + "@h/0", "redis://u@h/0"},
		{"redis://h/0", "redis://h/0"},
	}
	for _, tt := range tests {
		if got := redact(tt.dsn); got != tt.want {
			t.Errorf("redact(%q) = %q, want %q", tt.dsn, got, tt.want)
		}
	}
}

func TestScrub(t *testing.T) {
	dsn := "redis://u:p@ss:w/rd" + secret + "@h/0"
	msg := lease.Scrub("cannot use p@ss:w/rd"+secret+" nor p@ss:w/rd"+secret, dsnSecrets(dsn))
	wantNoSecret(t, "scrubbed message", msg)
}
