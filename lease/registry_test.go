package lease_test

import (
	"context"
	"errors"
	"slices"
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

// Sketch shows where a store is, before the store parses its DSN, and
// never a credential.
func TestSketchShowsNoSecret(t *testing.T) {
	for _, tc := range []struct{ dsn, want string }{
		{"sqlite:///var/lib/leaderrun/l.db", "sqlite:/var/lib/leaderrun/l.db"},
		{"sqlite:/tmp/l.db?_pragma=x", "sqlite:/tmp/l.db"},
		{"postgres://app:hunter2@db.example:5432/leases?sslmode=verify-full&password=hunter2", "postgres://db.example:5432"},
		{"mysql://app:hunter2@tcp(db:3306)/leases", "mysql"},
		{"redis://:hunter2@cache:6379/0", "redis://cache:6379"},
		{"etcds://user:hunter2@10.0.0.1:2379,10.0.0.2:2379/prefix", "etcds://10.0.0.1:2379,10.0.0.2:2379"},
		{"host=db user=app password=hunter2", "postgres (keyword=value DSN)"},
		{"hunter2", ""},
		{"s3cr3t:hunter2", ""},
	} {
		got := lease.Sketch(tc.dsn)
		if strings.Contains(got, "hunter2") || strings.Contains(got, "app") {
			t.Errorf("Sketch(%q) = %q: it shows a credential", tc.dsn, got)
		}
		if got != tc.want {
			t.Errorf("Sketch(%q) = %q, want %q", tc.dsn, got, tc.want)
		}
	}
}

// TestOpenSaysHowToGetALeftOutStore: a build that leaves a store out
// (-tags noetcd, nokubernetes) says so when a DSN names it, and how to get
// it, instead of only "unknown scheme".
func TestOpenSaysHowToGetALeftOutStore(t *testing.T) {
	lease.RegisterLeftOut("noexample", "example")
	_, err := lease.Open(context.Background(), "example://u:hunter2@h/x")
	want := `unknown scheme "example": this build leaves it out (-tags noexample); build without that tag`
	if !errors.Is(err, lease.ErrRefused) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("Open of a left-out store = %v, want a refusal saying %q, without the password", err, want)
	}
}

// TestEveryStoreIsBuiltOrSaysWhyNot: the default build has every store,
// the Kubernetes one included; a build with an opt-out tag names the tag
// when asked for the store it left out.
func TestEveryStoreIsBuiltOrSaysWhyNot(t *testing.T) {
	for _, dsn := range []string{"etcd://127.0.0.1:1/x", "k8s://ns?kubeconfig=/nonexistent/kubeconfig"} {
		scheme, _, _ := strings.Cut(dsn, ":")
		if slices.Contains(lease.Schemes(), scheme) {
			continue
		}
		_, err := lease.Open(context.Background(), dsn)
		if err == nil || !strings.Contains(err.Error(), "this build leaves it out") {
			t.Errorf("scheme %q is not built in, and Open(%q) = %v does not say how to get it", scheme, dsn, err)
		}
	}
}
