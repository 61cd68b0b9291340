package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestLoggedStatements(t *testing.T) {
	dir := t.TempDir()
	my := filepath.Join(dir, "general.log")
	os.WriteFile(my, []byte("261203 18:20:52\t     4 Query\tCALL `leaderrun_renew`('n', 'h', 1, 15000000)\n"+
		"\t\t    10 Query\tSELECT IF(holder = 'h' AND token = 1\n\tAND x, 1, 0)\n"+
		"\t\t     3 Query\tSHOW GLOBAL STATUS\n"), 0o644)
	got, err := mysqlLoggedStatements(my, 0, map[string]string{"4": "leader", "10": "follower 1"})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"leader: Query CALL `leaderrun_renew`": 1, "follower 1: Query SELECT IF": 1}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Fatalf("got %v, want %v", got, want)
		}
	}
	pg := filepath.Join(dir, "pg.log")
	os.WriteFile(pg, []byte("2026-12-03 18:16:31.950 UTC [5404] postgres@slpg1 LOG:  execute stmtcache_8c2c: SELECT name, holder, token,\n"+
		"2026-12-03 18:16:31.950 UTC [5404] postgres@slpg1 DETAIL:  parameters: $1 = 'sl'\n"+
		"2026-12-03 18:16:31.951 UTC [77] postgres@other LOG:  statement: SELECT 1\n"), 0o644)
	got, err = pgLoggedStatements(pg, 0, "slpg1", map[string]string{"5404": "follower 2"})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got["follower 2: SELECT name, holder,"] != 1 {
		t.Fatalf("got %v", got)
	}
}
