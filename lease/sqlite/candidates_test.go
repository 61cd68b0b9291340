package sqlite

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// oldSchema is the tables as the version before Campaign created them
// (git show 8cae9b5:lease/sqlite/schema.go): candidates without the
// attributes of a candidacy.
var oldSchema = []string{`CREATE TABLE leases (
	name        TEXT PRIMARY KEY,
	holder      TEXT NOT NULL,
	token       INTEGER NOT NULL,
	boot_id     TEXT NOT NULL,
	acquired_ms INTEGER NOT NULL,
	renewed_ms  INTEGER NOT NULL,
	expires_ms  INTEGER NOT NULL,
	released    INTEGER NOT NULL DEFAULT 0,
	step_down   INTEGER NOT NULL DEFAULT 0,
	successor   TEXT NOT NULL DEFAULT '',
	excluded_holder TEXT NOT NULL DEFAULT '',
	reserved_ms INTEGER NOT NULL DEFAULT 0,
	location    TEXT NOT NULL DEFAULT ''
) STRICT`, `CREATE TABLE candidates (
	name    TEXT NOT NULL,
	holder  TEXT NOT NULL,
	boot_id TEXT NOT NULL,
	seen_ms INTEGER NOT NULL,
	PRIMARY KEY (name, holder)
) STRICT`, `CREATE TABLE groups (
	name       TEXT PRIMARY KEY,
	partitions INTEGER NOT NULL
) STRICT`, `CREATE TABLE members (
	grp        TEXT NOT NULL,
	member     TEXT NOT NULL,
	boot_id    TEXT NOT NULL,
	expires_ms INTEGER NOT NULL,
	PRIMARY KEY (grp, member)
) STRICT`}

// oldCandidateSQL is how the version before Campaign marked a candidate;
// such a leaderrun may still run beside this one on an upgraded file.
const oldCandidateSQL = `INSERT INTO candidates (name, holder, boot_id, seen_ms)
VALUES (?1, ?2, ?3, ?4)
ON CONFLICT (name, holder) DO UPDATE SET boot_id = excluded.boot_id, seen_ms = excluded.seen_ms`

// TestOldCandidatesTableIsUpgraded: a database made by the version before
// Campaign gets the candidacy columns in place; a candidate that version
// wrote reads as the zero Candidacy, and one that campaigns keeps what it
// said when that version marks it again.
func TestOldCandidatesTableIsUpgraded(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaderrun.db")
	db := rawDB(t, path)
	for _, q := range oldSchema {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	now, err := theClock().now()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(oldCandidateSQL, "n", "old", theClock().bootID, now.millis()+60_000); err != nil {
		t.Fatal(err)
	}

	s := openTest(t, path)
	got, err := s.Candidates(ctx(t), "n")
	if err != nil {
		t.Fatalf("Candidates on the upgraded table: %v", err)
	}
	if len(got) != 1 || got[0].Holder != "old" || got[0].Candidacy != (lease.Candidacy{}) || got[0].Seen <= 0 {
		t.Fatalf("Candidates = %+v, want old alone with the zero Candidacy", got)
	}
	want := lease.Candidacy{Priority: 3, Preempt: true, Ineligible: time.Hour, Note: "cooling down"}
	if err := s.Campaign(ctx(t), "n", "new", want, time.Minute); err != nil {
		t.Fatalf("Campaign on the upgraded table: %v", err)
	}
	// An old leaderrun beside this one marks new again (a refused Acquire).
	if _, err := db.Exec(oldCandidateSQL, "n", "new", theClock().bootID, now.millis()+120_000); err != nil {
		t.Fatal(err)
	}
	got, err = s.Candidates(ctx(t), "n")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Holder != "new" || got[1].Holder != "old" {
		t.Fatalf("Candidates = %+v, want new and old", got)
	}
	if c := got[0].Candidacy; c.Priority != want.Priority || !c.Preempt || c.Note != want.Note || c.Ineligible <= 0 {
		t.Errorf("new reads %+v after an old mark, want %+v", c, want)
	}
	// A second Open finds nothing left to add.
	openTest(t, path)
}

// TestNoteKeepsItsBytes: a note of any bytes, at the most MaxNote, reads
// back as written; a longer one is refused and writes nothing.
func TestNoteKeepsItsBytes(t *testing.T) {
	s := openTest(t, filepath.Join(t.TempDir(), "leaderrun.db"))
	note := "it's \"down\"\n\x00\xff\xfe;--"
	if err := s.Campaign(ctx(t), "n", "a", lease.Candidacy{Note: note}, time.Minute); err != nil {
		t.Fatal(err)
	}
	long := make([]byte, lease.MaxNote+1)
	if err := s.Campaign(ctx(t), "n", "b", lease.Candidacy{Note: string(long)}, time.Minute); err == nil {
		t.Error("Campaign with a note longer than MaxNote succeeded")
	}
	got, err := s.Candidates(ctx(t), "n")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Note != note {
		t.Errorf("Candidates = %+v, want a alone with note %q", got, note)
	}
}
