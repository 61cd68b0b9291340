package e2e

import (
	"database/sql"
	"fmt"

	"github.com/rogpeppe/go-internal/testscript"
)

// renewed DBFILE NAME READYFILE: wait until the leader renews NAME's SQLite
// lease twice more, then check that it still holds it under the token in
// READYFILE with no step-down requested. A tenure that ended stops
// renewing, so two renewals prove it went on.
func cmdRenewed(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: renewed DBFILE NAME READYFILE")
	}
	db, err := sql.Open("sqlite", ts.MkAbs(args[0]))
	ts.Check(err)
	defer db.Close()
	type state struct {
		token, renewed int64
		released, stop bool
	}
	read := func() state {
		var s state
		err := db.QueryRow(`SELECT token, renewed_ms, released, step_down FROM leases WHERE name = ?`, args[1]).
			Scan(&s.token, &s.renewed, &s.released, &s.stop)
		ts.Check(err)
		return s
	}
	last := read()
	for i := range 2 {
		waitFor(ts, fmt.Sprintf("renewal %d of %q", i+1, args[1]), func() bool {
			cur := read()
			if cur.renewed == last.renewed {
				return false
			}
			last = cur
			return true
		})
	}
	if want := readToken(ts, args[2]); last.token != want || last.released || last.stop {
		ts.Fatalf("lease %q: token %d, released %v, step-down %v; want token %d, held, no step-down",
			args[1], last.token, last.released, last.stop, want)
	}
}
