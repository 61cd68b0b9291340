package redis

import (
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/testenv/redistest"
)

// TestTLS runs a store over rediss:// against a server that speaks only
// TLS: the store's own dialer must negotiate it, followers must be woken
// through it, and an unverifiable certificate must fail the connection.
func TestTLS(t *testing.T) {
	srv := redistest.StartTLSServer(t)
	if _, err := Open(testCtx(t), srv.URL()); err == nil {
		t.Error("Open with a self-signed certificate succeeded, want a verification error")
	} else {
		t.Logf("unverifiable certificate: %v", err)
	}
	if _, err := Open(testCtx(t), "redis"+srv.URL()[len("rediss"):]); err == nil {
		t.Error("Open of a TLS port without TLS succeeded")
	}
	dsn := srv.URL() + "?skip_verify=true"
	a, b := openStore(t, dsn), openStore(t, dsn)
	ctx := testCtx(t)
	rec, err := a.Acquire(ctx, "n", "a", time.Minute)
	if err != nil {
		t.Fatalf("Acquire over TLS: %v", err)
	}
	done := startWait(t, b, "n", rec, 30*time.Second)
	subscribed(t, b, "n")
	if err := a.Release(ctx, "n", "a", rec.Token); err != nil {
		t.Fatal(err)
	}
	wantWoken(t, done, 5*time.Second)
	if _, err := b.Acquire(ctx, "n", "b", time.Minute); err != nil {
		t.Fatalf("Acquire after release over TLS: %v", err)
	}
}
