package replica

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	_ "github.com/leaderrun/leaderrun/lease/stores"
)

// A DSN whose host does not resolve retried with a warning every few
// seconds and the resolver's words alone, for ever. Now the same failure
// is said at warn level once, then once a minute, and after a minute of it
// the line says that the host name does not resolve and to check the DSN;
// another failure is said at once. Every networked store's error carries
// the resolver's answer (etcd's lost it in its text).
func TestUnresolvedHostSaidOnceAMinute(t *testing.T) {
	for _, dsn := range []string{
		"postgres://postgres@nc-nohost.invalid/app?sslmode=disable",
		"mysql://root@nc-nohost.invalid/app",
		"redis://nc-nohost.invalid:6379/0",
		"etcd://nc-nohost.invalid:2379/leaderrun",
	} {
		t.Run(strings.Split(dsn, ":")[0], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			_, err := lease.Open(ctx, dsn)
			// A busy resolver may time out instead of saying that the
			// name does not exist: ask again (the lookup is what is
			// tested here, not the resolver).
			for try := 1; try < 5 && err != nil && resolverTimedOut(err) && ctx.Err() == nil; try++ {
				_, err = lease.Open(ctx, dsn)
			}
			if err == nil || errors.Is(err, lease.ErrRefused) {
				t.Fatalf("Open(%s) = %v, want an error to retry", dsn, err)
			}
			var logged bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logged, nil))
			var said unreachableLog
			start := time.Now()
			// Retried every 5 s (the back-off's cap) for two minutes.
			for at := time.Duration(0); at <= 2*time.Minute; at += 5 * time.Second {
				said.log(log, err, 5*time.Second, start.Add(at))
			}
			lines := strings.Split(strings.TrimSpace(logged.String()), "\n")
			if got, want := len(lines), 3; got != want {
				t.Fatalf("%d lines at info level for two minutes of the same failure, want %d (at 0, 1 min, 2 min):\n%s", got, want, logged.String())
			}
			if !strings.Contains(lines[0], `msg="store unreachable; retrying"`) {
				t.Errorf("first line %q, want the failure said at once", lines[0])
			}
			for _, l := range lines[1:] {
				if !strings.Contains(l, "does not resolve; check the host in the DSN") || !strings.Contains(l, "host=nc-nohost.invalid") {
					t.Errorf("line %q does not say that nc-nohost.invalid does not resolve", l)
				}
			}
			if !strings.Contains(lines[1], "for=1m0s") {
				t.Errorf("line %q does not say how long the failure lasted (1m0s)", lines[1])
			}
			logged.Reset()
			said.log(log, errors.New("connection refused"), 5*time.Second, start.Add(2*time.Minute+5*time.Second))
			if !strings.Contains(logged.String(), "connection refused") {
				t.Errorf("another failure was not said at once: %q", logged.String())
			}
		})
	}
}

// resolverTimedOut reports whether err is a lookup that the resolver did
// not answer in time (etcd's error keeps only the text).
func resolverTimedOut(err error) bool {
	var dns *net.DNSError
	if errors.As(err, &dns) {
		return dns.IsTimeout
	}
	return strings.Contains(err.Error(), "lookup nc-nohost.invalid") && strings.Contains(err.Error(), "i/o timeout")
}
