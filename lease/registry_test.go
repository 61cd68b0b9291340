package lease_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/leaderrun/leaderrun/lease"
	_ "github.com/leaderrun/leaderrun/lease/stores"
)

// TestOpenNeverEchoesAnUnknownDSN: what does not parse as a DSN may be a
// password (a --store-file with the wrong line) or hold one.
func TestOpenNeverEchoesAnUnknownDSN(t *testing.T) {
	for _, dsn := range []string{
		"hunter2",
		"s3cr3t:pa55",
		"pass word:hunter2",
		"/tmp/x.db",
		"mysql:\x00hunter2",
	} {
		_, err := lease.Open(context.Background(), dsn)
		if !errors.Is(err, lease.ErrRefused) {
			t.Errorf("Open(%q) = %v, want a refusal", dsn, err)
			continue
		}
		for _, secret := range []string{"hunter2", "pa55", "s3cr3t", "/tmp/x.db"} {
			if strings.Contains(dsn, secret) && strings.Contains(err.Error(), secret) {
				t.Errorf("Open(%q) = %q: it echoes %q", dsn, err, secret)
			}
		}
	}
	// keyword=value pairs go to PostgreSQL, which does not echo the
	// password either (here: a host that does not resolve, retried).
	_, err := lease.Open(context.Background(), "user=app password=hunter2:x host=nosuchhost.invalid connect_timeout=1")
	if err == nil || !strings.Contains(err.Error(), "postgres") || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("Open of keyword=value pairs = %v, want the PostgreSQL store's error without the password", err)
	}
	_, err = lease.Open(context.Background(), "nosuchstore://u:hunter2@h/x")
	if err == nil || !strings.Contains(err.Error(), `unknown scheme "nosuchstore"`) || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("Open of an unknown scheme = %v, want it named, and the password not shown", err)
	}
}
