package sqlite

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

// A corrupt page of the database is an error that retrying is not expected
// to fix: at startup it is a refusal (leaderrun exits 125), once running it
// is retried like any refusal, so that a database repaired meanwhile (or
// replaced from a backup) is used again.

// corruptible is a store's database, closed, whose pages a test can spoil
// and restore.
type corruptible struct {
	path     string
	pageSize int64
}

// newCorruptible creates a store at a fresh path, acquires and releases
// "n" in it so that each table has its page, and closes it, its WAL
// checkpointed into the file.
func newCorruptible(t *testing.T) corruptible {
	t.Helper()
	path := filepath.Join(t.TempDir(), "leaderrun.db")
	s, err := Open(ctx(t), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec, err := s.Acquire(ctx(t), "n", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx(t), "n", "a", rec.Token); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db := rawDB(t, path)
	var ps int64
	if err := db.QueryRow(`PRAGMA page_size`).Scan(&ps); err != nil {
		t.Fatal(err)
	}
	db.Close()
	return corruptible{path: path, pageSize: ps}
}

// leasesPage returns the offset of the leases table's root page, which
// holds its rows, reading the schema through a connection of its own.
func (c corruptible) leasesPage(t *testing.T) int64 {
	t.Helper()
	db := rawDB(t, c.path)
	defer db.Close()
	var root int64
	if err := db.QueryRow(`SELECT rootpage FROM sqlite_schema WHERE name = 'leases'`).Scan(&root); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		t.Fatal(err)
	}
	return (root - 1) * c.pageSize
}

// spoil overwrites 64 bytes at off (a b-tree page header) with garbage and
// returns what was there.
func (c corruptible) spoil(t *testing.T, off int64) []byte {
	t.Helper()
	junk := []byte(strings.Repeat("\xa5", 64))
	return c.write(t, off, junk)
}

func (c corruptible) write(t *testing.T, off int64, data []byte) []byte {
	t.Helper()
	f, err := os.OpenFile(c.path, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	old := make([]byte, len(data))
	if _, err := f.ReadAt(old, off); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, off); err != nil {
		t.Fatal(err)
	}
	return old
}

// touch commits a write to another table through a connection of its
// own, so that the store's connections drop their cached pages and read
// the file again.
func (c corruptible) touch(t *testing.T) {
	t.Helper()
	db := rawDB(t, c.path)
	defer db.Close()
	if _, err := db.Exec(`INSERT INTO groups (name, partitions) VALUES ('touch', 1)
		ON CONFLICT (name) DO UPDATE SET partitions = partitions + 1`); err != nil {
		t.Fatal(err)
	}
}

func TestCorruptPageAtStartupIsRefused(t *testing.T) {
	t.Run("schema", func(t *testing.T) {
		c := newCorruptible(t)
		c.spoil(t, 100) // page 1's b-tree header, after the file header
		_, err := Open(ctx(t), c.path, Options{})
		if !errors.Is(err, lease.ErrRefused) || !strings.Contains(err.Error(), "malformed") {
			t.Errorf("Open of a database with a corrupt schema page = %v, want a refusal that says it is malformed", err)
		}
	})
	t.Run("leases", func(t *testing.T) {
		c := newCorruptible(t)
		c.spoil(t, c.leasesPage(t))
		s := openTest(t, c.path) // the schema is intact
		_, err := s.Acquire(ctx(t), "n", "b", time.Minute)
		if !errors.Is(err, lease.ErrRefused) || !strings.Contains(err.Error(), "malformed") {
			t.Errorf("Acquire in a corrupt lease table = %v, want a refusal that says it is malformed", err)
		}
		// A campaign that never had an answer ends (exit 125) instead of
		// retrying "store unavailable" for ever.
		e := &elect.Elector{Store: s, Name: "n", Holder: "b",
			LeaseDuration: 3 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 300 * time.Millisecond}
		cctx, cancel := context.WithTimeout(ctx(t), 5*time.Second)
		defer cancel()
		ten, err := e.Campaign(cctx)
		if ten != nil {
			t.Fatalf("acquired %+v in a corrupt lease table", ten.Record)
		}
		if !errors.Is(err, lease.ErrRefused) {
			t.Errorf("Campaign on a corrupt lease table = %v, want a refusal at once", err)
		}
	})
}

// TestCorruptPageMidRunIsRetried: the lease table's page turns corrupt
// under a leader. Its tenure ends at the renew deadline; the campaign that
// follows does not end, although the error is a refusal, and wins the name
// again once the page is restored.
func TestCorruptPageMidRunIsRetried(t *testing.T) {
	c := newCorruptible(t)
	s := openTest(t, c.path)
	e := &elect.Elector{Store: s, Name: "relay", Holder: "a",
		LeaseDuration: 3 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 300 * time.Millisecond}
	var off int64
	var good []byte
	leasetest.RefusedMidRun(t, ctx(t), e, "the lease table was corrupt",
		func() {
			off = c.leasesPage(t)
			good = c.spoil(t, off)
			c.touch(t)
		},
		func() {
			c.write(t, off, good)
			c.touch(t)
		})
}
