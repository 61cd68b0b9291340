package redis

import (
	"context"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leaderrun/leaderrun/internal/testenv/redistest"
	"github.com/leaderrun/leaderrun/internal/testenv/tcpproxy"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// serverURL returns the shared test server's URL; see redistest.Require.
func serverURL(t *testing.T) string {
	t.Helper()
	return redistest.Require(t)
}

// newPrefix picks a key prefix no other test uses, deletes its keys at
// cleanup, and returns the DSN that selects it on the shared server.
func newPrefix(t *testing.T) (dsn, prefix string) {
	t.Helper()
	return redistest.NewPrefix(t)
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// openStore opens dsn and closes the store at cleanup.
func openStore(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(testCtx(t), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// adminClient is a plain client of the server at serverURL, closed at
// cleanup.
func adminClient(t *testing.T, serverURL string) *goredis.Client {
	t.Helper()
	c, err := redistest.Client(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// harness is the conformance suite's harness on the server at serverURL,
// under its own prefix.
func harness(t *testing.T, serverURL string) leasetest.Harness {
	dsn, prefix := redistest.PrefixOn(t, serverURL)
	k := keys{prefix: prefix + ":"}
	return leasetest.Harness{
		Open: func(t *testing.T) lease.Store {
			s, err := Open(testCtx(t), dsn)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			return s
		},
		Delete: func(t *testing.T, name string) {
			if err := adminClient(t, serverURL).Del(testCtx(t), k.lease(name)).Err(); err != nil {
				t.Fatal(err)
			}
		},
		Delaying: func(t *testing.T) (lease.Store, func(string, time.Duration), func()) {
			// A grant is one script call, the holder among its
			// arguments.
			addr, err := redistest.Addr(serverURL)
			if err != nil {
				t.Skip(err)
			}
			p, err := tcpproxy.New(addr)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { p.Close() })
			via, err := redistest.ViaAddr(dsn, p.Addr())
			if err != nil {
				t.Skip(err)
			}
			s, err := Open(testCtx(t), via)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			return s, p.DelayAfter, p.Pass
		},
		Listening: func(t *testing.T, s lease.Store, name string) { subscribed(t, s.(*Store), name) },
	}
}

// subscribed waits until s's subscription is confirmed with a waiter on
// name, and returns its epoch.
func subscribed(t *testing.T, s *Store, name string) uint64 {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for {
		ok, changed := s.sub.Listening(name)
		if ok {
			return s.sub.Notice().Epoch
		}
		select {
		case <-changed:
		case <-deadline:
			t.Fatalf("subscription not confirmed with a waiter on %q after 10s", name)
		}
	}
}
