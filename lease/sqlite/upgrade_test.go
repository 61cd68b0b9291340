package sqlite

import (
	"path/filepath"
	"testing"
	"time"
)

// oldTable is the leases table as the first release created it, before the
// step-down columns.
const oldTable = `CREATE TABLE leases (
	name        TEXT PRIMARY KEY,
	holder      TEXT NOT NULL,
	token       INTEGER NOT NULL,
	boot_id     TEXT NOT NULL,
	acquired_ms INTEGER NOT NULL,
	renewed_ms  INTEGER NOT NULL,
	expires_ms  INTEGER NOT NULL,
	released    INTEGER NOT NULL DEFAULT 0
) STRICT`

func TestOldTableIsUpgraded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaderrun.db")
	db := rawDB(t, path)
	for _, q := range []string{oldTable,
		`INSERT INTO leases VALUES ('n', 'old', 4102444800000, 'another-boot', 1, 1, 2, 1)`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	db.Close()

	s := openTest(t, path)
	rec, err := s.Get(ctx(t), "n")
	if err != nil {
		t.Fatalf("Get of a row from the old table: %v", err)
	}
	if rec.Holder != "old" || rec.Token != 4102444800000 || rec.StepDown || rec.Reserved != 0 {
		t.Errorf("Get = %+v, want the old row with no step-down", rec)
	}
	got, err := s.Acquire(ctx(t), "n", "a", time.Minute)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if got.Token <= rec.Token {
		t.Errorf("token = %d, want > %d", got.Token, rec.Token)
	}
	if _, err := s.RequestStepDown(ctx(t), "n", "", time.Minute); err != nil {
		t.Errorf("RequestStepDown on the upgraded table: %v", err)
	}
	// A second Open finds nothing left to add.
	openTest(t, path)
}

func TestOtherBootReservationHasEnded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaderrun.db")
	s := openTest(t, path)
	rec, err := s.Acquire(ctx(t), "n", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.RequestStepDown(ctx(t), "n", "", time.Hour); err != nil {
		t.Fatal(err)
	}
	if err := s.Release(ctx(t), "n", "a", rec.Token); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx(t), "n", "a", time.Minute); err == nil {
		t.Fatal("the holder that stepped down re-acquired within the window")
	}
	if _, err := rawDB(t, path).Exec(`UPDATE leases SET boot_id = 'another-boot' WHERE name = 'n'`); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx(t), "n", "a", time.Minute); err != nil {
		t.Errorf("Acquire after a reboot voided the reservation: %v", err)
	}
}
