package postgres

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/lease"
)

// oldCandidatesTable is the candidates table as the version before
// Campaign created it (git show 8cae9b5:lease/postgres/schema.go), and
// oldMark how that version marked a candidate on a refused acquire; such
// a leaderrun may still run beside this one on an upgraded schema.
const (
	oldCandidatesTable = `CREATE TABLE IF NOT EXISTS %s (
    name       text NOT NULL,
    holder     text NOT NULL,
    seen_until timestamptz NOT NULL,
    PRIMARY KEY (name, holder)
)`
	oldMark = `INSERT INTO %s AS c (name, holder, seen_until)
	SELECT $1, $2, now() + 2 * $3::bigint * interval '1 microsecond'
	ON CONFLICT (name, holder) DO UPDATE SET seen_until = excluded.seen_until`
)

// TestOldCandidatesTableIsUpgraded: a schema made by the version before
// Campaign gets the candidacy columns in place at Open; a candidate that
// version wrote reads as the zero Candidacy, and one that campaigns keeps
// what it said when that version marks it again.
func TestOldCandidatesTableIsUpgraded(t *testing.T) {
	dsn, schema := newSchema(t)
	admin := adminConn(t)
	if _, err := admin.PgConn().Exec(testCtx(t), SchemaSQL(schema)).ReadAll(); err != nil {
		t.Fatalf("SchemaSQL: %v", err)
	}
	cands := pgx.Identifier{schema, candidatesName}.Sanitize()
	exec(t, admin, "DROP TABLE "+cands)
	exec(t, admin, fmt.Sprintf(oldCandidatesTable, cands))
	exec(t, admin, fmt.Sprintf(oldMark, cands), "n", "old", time.Minute.Microseconds())

	s := openStore(t, dsn)
	ctx := testCtx(t)
	got, err := s.Candidates(ctx, "n")
	if err != nil {
		t.Fatalf("Candidates on the upgraded table: %v", err)
	}
	if len(got) != 1 || got[0].Holder != "old" || got[0].Candidacy != (lease.Candidacy{}) || got[0].Seen <= 0 {
		t.Fatalf("Candidates = %+v, want old alone with the zero Candidacy", got)
	}
	want := lease.Candidacy{Priority: 3, Preempt: true, Ineligible: time.Hour, Note: "cooling down"}
	if err := s.Campaign(ctx, "n", "new", want, time.Minute); err != nil {
		t.Fatalf("Campaign on the upgraded table: %v", err)
	}
	exec(t, admin, fmt.Sprintf(oldMark, cands), "n", "new", time.Minute.Microseconds())
	got, err = s.Candidates(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Holder != "new" || got[1].Holder != "old" {
		t.Fatalf("Candidates = %+v, want new and old", got)
	}
	if c := got[0].Candidacy; c.Priority != want.Priority || !c.Preempt || c.Note != want.Note || c.Ineligible <= 0 {
		t.Errorf("new reads %+v after an old mark, want %+v", c, want)
	}
	// The upgraded schema is whole: a store opened for an operator's
	// command, which creates nothing, accepts it.
	e, err := open(ctx, dsn, true)
	if err != nil {
		t.Fatalf("open existing after the upgrade: %v", err)
	}
	e.Close()
}

// TestNoteKeepsItsBytes: a note of any bytes, at the most MaxNote, reads
// back as written; a longer one is refused and writes nothing.
func TestNoteKeepsItsBytes(t *testing.T) {
	dsn, _ := newSchema(t)
	s := openStore(t, dsn)
	ctx := testCtx(t)
	note := "it's \"down\"\n\x00\xff\xfe;--"
	if err := s.Campaign(ctx, "n", "a", lease.Candidacy{Note: note}, time.Minute); err != nil {
		t.Fatal(err)
	}
	long := make([]byte, lease.MaxNote+1)
	if err := s.Campaign(ctx, "n", "b", lease.Candidacy{Note: string(long)}, time.Minute); err == nil {
		t.Error("Campaign with a note longer than MaxNote succeeded")
	}
	got, err := s.Candidates(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Note != note {
		t.Errorf("Candidates = %+v, want a alone with note %q", got, note)
	}
}

// TestForgetRefusesAHeldName: a held name is not forgotten even when its
// token is behind the clock, which leaves the held check alone to refuse;
// once the lease expires untaken, by the database's clock, it is.
func TestForgetRefusesAHeldName(t *testing.T) {
	dsn, schema := newSchema(t)
	s := openStore(t, dsn)
	ctx := testCtx(t)
	const ttl = 300 * time.Millisecond
	if _, err := s.Acquire(ctx, "n", "a", ttl); err != nil {
		t.Fatal(err)
	}
	exec(t, adminConn(t), "UPDATE "+pgx.Identifier{schema, tableName}.Sanitize()+" SET token = 1, expires_at = now() + interval '1 hour' WHERE name = 'n'")
	var held *lease.HeldError
	if err := s.Forget(ctx, "n"); !errors.As(err, &held) || held.Record.Holder != "a" || held.Record.Token != 1 {
		t.Fatalf("Forget of a held name: %v, want a *lease.HeldError naming a", err)
	}
	if got, err := s.Get(ctx, "n"); err != nil || !got.Held() {
		t.Fatalf("after a refused Forget: %+v, %v; want a still holding it", got, err)
	}
	exec(t, adminConn(t), "UPDATE "+pgx.Identifier{schema, tableName}.Sanitize()+" SET expires_at = now() - interval '1 second' WHERE name = 'n'")
	if err := s.Forget(ctx, "n"); err != nil {
		t.Fatalf("Forget of a name expired untaken: %v", err)
	}
	if _, err := s.Get(ctx, "n"); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("Get after Forget: %v, want ErrNotFound", err)
	}
}
