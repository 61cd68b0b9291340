package mysql

import (
	"slices"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// oldCandidatesTable is the candidates table as the version before
// Campaign created it (git show 8cae9b5:lease/mysql/schema.go).
const oldCandidatesTable = "CREATE TABLE `" + candidatesTable + "` (\n" +
	"    `name` VARBINARY(255) NOT NULL,\n" +
	"    `holder` VARBINARY(255) NOT NULL,\n" +
	"    `seen_until` DATETIME(6) NOT NULL,\n" +
	"    PRIMARY KEY (name, holder)\n" +
	") ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 " +
	"COMMENT='Holders that tried to acquire a name: the successors a step-down may name while seen_until is ahead.'"

// TestOldCandidatesTableIsUpgraded: a database made by the version before
// Campaign gets the candidacy columns in place at Open; a candidate that
// version marked (its candidate procedure, which this version keeps)
// reads as the zero Candidacy, and one that campaigns keeps what it said
// when that version marks it again.
func TestOldCandidatesTableIsUpgraded(t *testing.T) {
	dsn, _ := newDatabase(t)
	db := admin(t, dsn)
	for _, stmt := range upgradeStatements(schemaState{}) {
		exec(t, db, stmt)
	}
	exec(t, db, "DROP TABLE `"+candidatesTable+"`")
	exec(t, db, oldCandidatesTable)
	mark := "CALL `" + seenProcedure + "`(?, ?, ?)"
	exec(t, db, mark, "n", "old", time.Minute.Microseconds())

	s := openStore(t, dsn)
	var want []string
	for _, c := range tables[2].columns {
		want = append(want, c.name)
	}
	if got := tableColumns(t, dsn, candidatesTable); !slices.Equal(got, want) {
		t.Errorf("columns after the upgrade = %q, want %q", got, want)
	}
	ctx := testCtx(t)
	got, err := s.Candidates(ctx, "n")
	if err != nil {
		t.Fatalf("Candidates on the upgraded table: %v", err)
	}
	if len(got) != 1 || got[0].Holder != "old" || got[0].Candidacy != (lease.Candidacy{}) || got[0].Seen <= 0 {
		t.Fatalf("Candidates = %+v, want old alone with the zero Candidacy", got)
	}
	c := lease.Candidacy{Priority: 3, Preempt: true, Ineligible: time.Hour, Note: "cooling down"}
	if err := s.Campaign(ctx, "n", "new", c, time.Minute); err != nil {
		t.Fatalf("Campaign on the upgraded table: %v", err)
	}
	exec(t, db, mark, "n", "new", time.Minute.Microseconds())
	got, err = s.Candidates(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Holder != "new" || got[1].Holder != "old" {
		t.Fatalf("Candidates = %+v, want new and old", got)
	}
	if g := got[0].Candidacy; g.Priority != c.Priority || !g.Preempt || g.Note != c.Note || g.Ineligible <= 0 {
		t.Errorf("new reads %+v after an old mark, want %+v", g, c)
	}
}

// TestNoteKeepsItsBytes: a note of any bytes, at the most MaxNote, reads
// back as written; a longer one is refused and writes nothing.
func TestNoteKeepsItsBytes(t *testing.T) {
	dsn, _ := newDatabase(t)
	s := openStore(t, dsn)
	ctx := testCtx(t)
	note := "it's \"down\"\n\x00\xff\xfe;--\\"
	if err := s.Campaign(ctx, "n", "a", lease.Candidacy{Note: note}, time.Minute); err != nil {
		t.Fatal(err)
	}
	full := string(make([]byte, lease.MaxNote))
	if err := s.Campaign(ctx, "n", "b", lease.Candidacy{Note: full}, time.Minute); err != nil {
		t.Fatalf("Campaign with a note of MaxNote bytes: %v", err)
	}
	if err := s.Campaign(ctx, "n", "c", lease.Candidacy{Note: full + "x"}, time.Minute); err == nil {
		t.Error("Campaign with a note longer than MaxNote succeeded")
	}
	got, err := s.Candidates(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Note != note || got[1].Note != full {
		t.Errorf("Candidates = %+v, want a with note %q and b", got, note)
	}
}
