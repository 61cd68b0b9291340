package sqlite_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/leaderrun/leaderrun/lease"
	_ "github.com/leaderrun/leaderrun/lease/sqlite"
)

// A DSN the store refuses gives a nil Store, not a Store holding a nil
// pointer, which a caller checking "s != nil" would use and crash on.
func TestRefusedDSNGivesNilStore(t *testing.T) {
	// The DSN parses; Open fails on the path, whose parent is a file.
	parent := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(parent, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	dsn := "sqlite:" + filepath.Join(parent, "l.db")
	s, err := lease.Open(context.Background(), dsn)
	if err == nil {
		s.Close()
		t.Fatalf("lease.Open(%q) = nil error, want an error for a path under a file", dsn)
	}
	if s != nil {
		t.Fatalf("lease.Open(%q) = (%#v, %v), want a nil Store with the error", dsn, s, err)
	}
}
