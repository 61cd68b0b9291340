package mysql

import (
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// tableColumns lists table's columns in dbName's database.
func tableColumns(t *testing.T, dsn, table string) []string {
	t.Helper()
	rows, err := admin(t, dsn).QueryContext(testCtx(t), `SELECT COLUMN_NAME FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ? ORDER BY ORDINAL_POSITION`, table)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, c)
	}
	return cols
}

// TestConcurrentOpenCreatesSchemaOnce opens many stores on a fresh
// database at once, as replicas starting together do.
func TestConcurrentOpenCreatesSchemaOnce(t *testing.T) {
	dsn, _ := newDatabase(t)
	const n = 12
	errs := make(chan error, n)
	start := make(chan struct{})
	for range n {
		go func() {
			<-start
			s, err := Open(testCtx(t), dsn)
			if err == nil {
				_, err = s.Acquire(testCtx(t), "n", "a", time.Minute)
				var held *lease.HeldError
				if errors.As(err, &held) {
					err = nil
				}
				s.Close()
			}
			errs <- err
		}()
	}
	close(start)
	for range n {
		select {
		case err := <-errs:
			if err != nil {
				t.Errorf("concurrent Open and Acquire: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("concurrent Open did not return")
		}
	}
	db := admin(t, dsn)
	for _, tbl := range tables {
		var engine string
		if err := db.QueryRowContext(testCtx(t), "SELECT ENGINE FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = ?",
			tbl.name).Scan(&engine); err != nil {
			t.Fatalf("table %s: %v", tbl.name, err)
		}
		if engine != "InnoDB" {
			t.Errorf("table %s uses %s, want InnoDB", tbl.name, engine)
		}
	}
}

// TestOldTableIsUpgraded opens a database as an older version might have
// left it (a lease table without the step-down, location and version
// columns, an older fence procedure): Open adds what is missing, replaces
// the procedure and keeps the rows.
func TestOldTableIsUpgraded(t *testing.T) {
	dsn, _ := newDatabase(t)
	db := admin(t, dsn)
	for _, stmt := range upgradeStatements(schemaState{}) {
		exec(t, db, stmt)
	}
	exec(t, db, "DROP PROCEDURE `"+fenceProcedure+"`")
	exec(t, db, "CREATE PROCEDURE `"+fenceProcedure+"`() COMMENT 'leaderrun fence v0' SELECT 1")
	exec(t, db, "ALTER TABLE `"+leasesTable+"` DROP COLUMN step_down, DROP COLUMN successor, DROP COLUMN excluded_holder, "+
		"DROP COLUMN reserved_until, DROP COLUMN location, DROP COLUMN version")
	exec(t, db, "INSERT INTO `"+leasesTable+"` (name, holder, token, acquired_at, renewed_at, expires_at, released) "+
		"VALUES ('n', 'old', 4102444800000, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), TRUE)")

	s := openStore(t, dsn)
	var want []string
	for _, c := range tables[0].columns {
		want = append(want, c.name)
	}
	if got := tableColumns(t, dsn, leasesTable); !slices.Equal(got, want) {
		t.Errorf("columns after the upgrade = %q, want %q", got, want)
	}
	ctx := testCtx(t)
	old, err := s.Get(ctx, "n")
	if err != nil {
		t.Fatalf("Get of a row from the old table: %v", err)
	}
	if old.Holder != "old" || old.Token != 4102444800000 || old.StepDown || old.Reserved != 0 {
		t.Errorf("Get = %+v, want the old row with no step-down", old)
	}
	rec, err := s.Acquire(ctx, "n", "a", time.Minute)
	if err != nil {
		t.Fatalf("Acquire on the upgraded table: %v", err)
	}
	if rec.Token <= old.Token {
		t.Errorf("token = %d, want > %d (the old row's)", rec.Token, old.Token)
	}
	child := beginChild(t, db)
	if got := child.fence(t, "n", rec.Token); got != "" {
		t.Errorf("fence after the upgrade: SQLSTATE %q", got)
	}
}

// TestForeignTableIsNeverAltered: a table of leaderrun's name that
// leaderrun did not create is refused and left as it is.
func TestForeignTableIsNeverAltered(t *testing.T) {
	for _, tc := range []struct{ what, create string }{
		{"other columns", "CREATE TABLE `" + leasesTable + "` (id INT PRIMARY KEY, note TEXT) ENGINE=InnoDB"},
		{"another engine", strings.Replace(tables[0].createSQL(), "ENGINE=InnoDB", "ENGINE=MyISAM", 1)},
		{"a foreign procedure", "CREATE PROCEDURE `" + fenceProcedure + "`() COMMENT 'ours' SELECT 1"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			dsn, _ := newDatabase(t)
			db := admin(t, dsn)
			exec(t, db, tc.create)
			before := tableColumns(t, dsn, leasesTable)
			err := openErr(t, dsn)
			if !errors.Is(err, lease.ErrRefused) || !strings.Contains(err.Error(), "not leaderrun's") && !strings.Contains(err.Error(), "not InnoDB") {
				t.Errorf("Open with a foreign object = %v, want ErrRefused saying so", err)
			}
			t.Logf("%v", err)
			if after := tableColumns(t, dsn, leasesTable); !slices.Equal(after, before) {
				t.Errorf("columns of the foreign table changed from %q to %q", before, after)
			}
			if cols := tableColumns(t, dsn, tokensTable); len(cols) != 0 {
				t.Errorf("Open created %s next to a foreign object", tokensTable)
			}
		})
	}
}

// TestTokenSurvivesDeletedRow: the last token lives in the tokens table,
// which a deleted lease row does not touch, so a grant after the deletion
// continues from it even when it is ahead of the server's clock (grants in
// a burst, a clock stepped back, a restored backup). The control deletes
// the token too and gets a token from the clock alone, lower.
func TestTokenSurvivesDeletedRow(t *testing.T) {
	for _, control := range []bool{false, true} {
		t.Run(fmt.Sprintf("control=%v", control), func(t *testing.T) {
			dsn, _ := newDatabase(t)
			s := openStore(t, dsn)
			db := admin(t, dsn)
			ctx := testCtx(t)
			rec, err := s.Acquire(ctx, "n", "a", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			ahead := rec.Token + int64(time.Hour/time.Millisecond)
			exec(t, db, "UPDATE `"+tokensTable+"` SET token = ? WHERE name = 'n'", ahead)
			exec(t, db, "UPDATE `"+leasesTable+"` SET token = ?, released = TRUE WHERE name = 'n'", ahead)
			exec(t, db, "DELETE FROM `"+leasesTable+"` WHERE name = 'n'")
			if control {
				exec(t, db, "DELETE FROM `"+tokensTable+"` WHERE name = 'n'")
			}
			if _, err := s.Get(ctx, "n"); !errors.Is(err, lease.ErrNotFound) {
				t.Fatalf("Get after the deletion = %v, want ErrNotFound", err)
			}
			next, err := s.Acquire(ctx, "n", "b", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if control {
				if next.Token > ahead {
					t.Errorf("control: token %d without the tokens row, want the clock's (< %d)", next.Token, ahead)
				}
				return
			}
			if got, want := next.Token, ahead+1; got != want {
				t.Errorf("token after the lease row was deleted = %d, want %d", got, want)
			}
		})
	}
}

// TestStatementsPerOperation counts the statements each operation sends;
// a renewal round is one transaction of the same statements whatever the
// number of claims.
func TestStatementsPerOperation(t *testing.T) {
	dsn, _ := newDatabase(t)
	s := openStore(t, dsn)
	ctx := testCtx(t)
	count := func(what string, fn func() error) int64 {
		t.Helper()
		before := s.Statements()
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		n := s.Statements() - before
		t.Logf("%s: %d statements", what, n)
		return n
	}
	var rec lease.Record
	count("Acquire of a new name", func() (err error) { rec, err = s.Acquire(ctx, "n", "a", time.Minute); return err })
	renew := count("Renew", func() error { _, err := s.Renew(ctx, "n", "a", rec.Token, time.Minute); return err })
	if renew != 1 {
		t.Errorf("Renew sent %d statements, want 1 (a CALL of %s)", renew, renewProcedure)
	}
	count("Release", func() error { return s.Release(ctx, "n", "a", rec.Token) })
	count("Acquire of a released name", func() (err error) { rec, err = s.Acquire(ctx, "n", "a", time.Minute); return err })
	refusal := count("refused Acquire", func() error {
		_, err := s.Acquire(ctx, "n", "b", time.Minute)
		if errors.As(err, new(*lease.HeldError)) {
			return nil
		}
		return fmt.Errorf("want *lease.HeldError, got %v", err)
	})
	if refusal != 1 {
		t.Errorf("a refused Acquire sent %d statements, want 1 (a CALL of %s)", refusal, seenProcedure)
	}

	const n = 64
	if _, err := s.Join(ctx, "g", n, "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	var claims []lease.Claim
	for p := range n {
		rec, err := s.Acquire(ctx, lease.PartitionKey("g", p), "a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		claims = append(claims, lease.Claim{Partition: p, Token: rec.Token})
	}
	var rounds []int64
	for _, k := range []int{0, 1, n} {
		rounds = append(rounds, count(fmt.Sprintf("RenewMember with %d claims", k), func() error {
			g, err := s.RenewMember(ctx, "g", "a", claims[:k], time.Minute)
			if err == nil && k > 0 && !g.Holds(k-1, "a", claims[k-1].Token) {
				err = fmt.Errorf("partition %d not held after the round", k-1)
			}
			return err
		}))
	}
	if rounds[1] != rounds[2] {
		t.Errorf("a renewal round sent %d statements with 1 claim and %d with %d claims, want the same", rounds[1], rounds[2], n)
	}
}

// TestRenewMemberIsAtomic: a renewal round that fails (its group is gone)
// renews none of its claims.
func TestRenewMemberIsAtomic(t *testing.T) {
	dsn, _ := newDatabase(t)
	s := openStore(t, dsn)
	db := admin(t, dsn)
	ctx := testCtx(t)
	if _, err := s.Join(ctx, "g", 2, "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	rec, err := s.Acquire(ctx, lease.PartitionKey("g", 0), "a", 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	exec(t, db, "DELETE FROM `"+groupsTable+"` WHERE name = 'g'")
	_, err = s.RenewMember(ctx, "g", "a", []lease.Claim{{Partition: 0, Token: rec.Token}}, time.Hour)
	if !errors.Is(err, lease.ErrNotFound) {
		t.Fatalf("RenewMember of a deleted group = %v, want ErrNotFound", err)
	}
	got, err := s.Get(ctx, rec.Name)
	if err != nil {
		t.Fatal(err)
	}
	if got.Remaining > 30*time.Second {
		t.Errorf("partition lease has %v left after a failed round, want ≤ 30s (not renewed)", got.Remaining)
	}
}

// fenceV1 is the fence procedure as version 1 created it: it share-locked
// the tokens row before checking the token.
const fenceV1 = "CREATE PROCEDURE `" + fenceProcedure + "`(IN lease_name VARBINARY(255), IN lease_token BIGINT)\n" +
	`    READS SQL DATA
    SQL SECURITY DEFINER
    COMMENT 'leaderrun fence v1'
BEGIN
    DECLARE current_token BIGINT DEFAULT NULL;
    DECLARE CONTINUE HANDLER FOR NOT FOUND SET current_token = NULL;
    SELECT token INTO current_token FROM ` + "`" + tokensTable + "`" + `
        WHERE name = lease_name AND token = lease_token LOCK IN SHARE MODE;
    IF current_token IS NULL THEN
        SIGNAL SQLSTATE 'LR001' SET MESSAGE_TEXT = 'leaderrun: token is not current';
    END IF;
END`

// routineComment is the comment of procedure name in dsn's database.
func routineComment(t *testing.T, db *sql.DB, name string) string {
	t.Helper()
	var comment string
	if err := db.QueryRowContext(testCtx(t), `SELECT ROUTINE_COMMENT FROM information_schema.ROUTINES
WHERE ROUTINE_SCHEMA = DATABASE() AND ROUTINE_NAME = ?`, name).Scan(&comment); err != nil {
		t.Fatalf("procedure %s: %v", name, err)
	}
	return comment
}

// TestFenceV1IsReplaced opens a database that version 1 left, with a
// child's user granted EXECUTE on fence: Open replaces the procedure with
// this version's, adds the procedures version 1 lacked, and (on MariaDB,
// which replaces a procedure in one statement) the child keeps its grant.
// Concurrent Opens replace it once, and a later version's procedure is
// never replaced by this one.
func TestFenceV1IsReplaced(t *testing.T) {
	dsn, dbName := newDatabase(t)
	db := admin(t, dsn)
	for _, stmt := range upgradeStatements(schemaState{}) {
		exec(t, db, stmt)
	}
	for _, r := range routines[1:] {
		exec(t, db, "DROP PROCEDURE `"+r.name+"`")
	}
	exec(t, db, "DROP PROCEDURE `"+fenceProcedure+"`")
	exec(t, db, fenceV1)
	child := otherUser(t, db, dsn, dbName) // EXECUTE on the database's procedures
	u, _ := url.Parse(child)
	user := u.User.Username()
	exec(t, db, "REVOKE EXECUTE ON `"+dbName+"`.* FROM '"+user+"'@'%'")
	exec(t, db, "GRANT EXECUTE ON PROCEDURE `"+dbName+"`.`"+fenceProcedure+"` TO '"+user+"'@'%'")

	const n = 6
	errs := make(chan error, n)
	for range n {
		go func() {
			s, err := Open(testCtx(t), dsn)
			if err == nil {
				s.Close()
			}
			errs <- err
		}()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("concurrent Open of a version 1 database: %v", err)
		}
	}
	for _, r := range routines {
		if got, want := routineComment(t, db, r.name), r.comment(); got != want {
			t.Errorf("procedure %s after the upgrade: comment %q, want %q", r.name, got, want)
		}
	}
	s := openStore(t, dsn)
	rec, err := s.Acquire(testCtx(t), "n", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var version string
	if err := db.QueryRowContext(testCtx(t), "SELECT VERSION()").Scan(&version); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(strings.ToLower(version), "mariadb") {
		cdb := admin(t, child)
		if got := beginChild(t, cdb).fence(t, "n", rec.Token); got != "" {
			t.Errorf("the child's fence after the upgrade: SQLSTATE %q, want success (its EXECUTE grant kept)", got)
		}
	}

	// A later version's procedure stays.
	later := strings.Replace(routines[0].createSQL(), routines[0].comment(), "leaderrun fence v99", 1)
	exec(t, db, "DROP PROCEDURE `"+fenceProcedure+"`")
	exec(t, db, later)
	openStore(t, dsn)
	if got := routineComment(t, db, fenceProcedure); got != "leaderrun fence v99" {
		t.Errorf("a later version's fence was replaced: comment %q", got)
	}
}

// TestCallRowReportsLateError: an error a procedure raises after its
// SELECT (as a failed COMMIT in leaderrun_renew would) is an error of the
// call, never a success with the row.
func TestCallRowReportsLateError(t *testing.T) {
	dsn, _ := newDatabase(t)
	s := openStore(t, dsn)
	exec(t, admin(t, dsn), "CREATE PROCEDURE late() BEGIN SELECT 1; SIGNAL SQLSTATE 'LR009' SET MESSAGE_TEXT = 'after the row'; END")
	err := s.callRow(testCtx(t), func(r row) error { var one int; return r.Scan(&one) }, "CALL late()")
	if err == nil {
		t.Fatal("callRow of a procedure that fails after its SELECT = nil, want its error")
	}
	t.Logf("callRow = %v", err)
}
