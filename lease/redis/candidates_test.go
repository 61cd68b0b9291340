package redis

import (
	"errors"
	"os"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/leaderrun/leaderrun/lease"
)

// oldAcquire is the acquire script of leaderrun 8cae9b5, which knew no
// candidate attributes (testdata/v8cae9b5: common.lua and acquire.lua as
// that version embedded them).
func oldAcquire(t *testing.T) *goredis.Script {
	t.Helper()
	var src []byte
	for _, f := range []string{"common", "acquire"} {
		b, err := os.ReadFile("testdata/v8cae9b5/" + f + ".lua")
		if err != nil {
			t.Fatal(err)
		}
		src = append(append(src, b...), '\n')
	}
	return goredis.NewScript(string(src))
}

// TestOldLeaderrunCandidates: a leaderrun that knows no attributes keeps
// working beside this one. Its refusals record candidates that read as
// the zero Candidacy, and leave what a campaigner said as it was, even
// when the campaigner is refused by it under the same identity; it
// grants a name whose candidates have attributes.
func TestOldLeaderrunCandidates(t *testing.T) {
	dsn, _ := newPrefix(t)
	s := openStore(t, dsn)
	ctx := testCtx(t)
	old := oldAcquire(t)
	const ttl = 10 * time.Second
	oldRefused := func(name, holder string) {
		t.Helper()
		reply, err := old.Run(ctx, s.client, []string{s.keys.lease(name), s.keys.token(name), s.keys.cand(name)},
			name, holder, ttl.Microseconds(), "", 0, s.channel).Slice()
		if err != nil {
			t.Fatalf("the old acquire script: %v", err)
		}
		if granted, _, _, err := decodeResult(reply); err != nil || granted {
			t.Fatalf("the old acquire script by %s: granted %v, %v; want a refusal", holder, granted, err)
		}
	}
	rec, err := s.Acquire(ctx, "n", "h", ttl)
	if err != nil {
		t.Fatal(err)
	}
	said := lease.Candidacy{Priority: 3, Preempt: true, Note: "a b\x00c"}
	if err := s.Campaign(ctx, "n", "a", said, ttl); err != nil {
		t.Fatal(err)
	}
	oldRefused("n", "old")
	oldRefused("n", "a")
	got, err := s.Candidates(ctx, "n")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Holder != "a" || got[1].Holder != "old" {
		t.Fatalf("Candidates = %+v, want a and old", got)
	}
	if got[0].Candidacy != said {
		t.Errorf("a reads %+v after an old refusal, want %+v", got[0].Candidacy, said)
	}
	if got[1].Candidacy != (lease.Candidacy{}) || got[1].Seen <= ttl {
		t.Errorf("old reads %+v, seen %v more; want the zero Candidacy, seen for more than %v", got[1].Candidacy, got[1].Seen, ttl)
	}
	if err := s.Release(ctx, "n", "h", rec.Token); err != nil {
		t.Fatal(err)
	}
	reply, err := old.Run(ctx, s.client, []string{s.keys.lease("n"), s.keys.token("n"), s.keys.cand("n")},
		"n", "old", ttl.Microseconds(), "", 0, s.channel).Slice()
	if err != nil {
		t.Fatal(err)
	}
	if granted, next, _, err := decodeResult(reply); err != nil || !granted || next.Token <= rec.Token {
		t.Fatalf("the old acquire script on a released name: granted %v token %d, %v; want a grant above %d", granted, next.Token, err, rec.Token)
	}
	var held *lease.HeldError
	if err := s.Forget(ctx, "n"); !errors.As(err, &held) || held.Record.Holder != "old" {
		t.Errorf("Forget of the name the old script granted: %v, want a *HeldError naming old", err)
	}
}
