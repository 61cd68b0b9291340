package leasetest

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

var _ lease.Campaigner = (*Memory)(nil)

// Campaign records holder's candidacy for name (lease.Campaign).
func (m *Memory) Campaign(ctx context.Context, name, holder string, c lease.Candidacy, ttl time.Duration) error {
	d, err := m.lock(ctx)
	if err != nil {
		return err
	}
	defer d.mu.Unlock()
	d.seeLocked(name, lease.Campaign(holder, c, ttl, d.now()))
	return nil
}

// Candidates lists name's live candidates.
func (m *Memory) Candidates(ctx context.Context, name string) ([]lease.Standing, error) {
	d, err := m.lock(ctx)
	if err != nil {
		return nil, err
	}
	defer d.mu.Unlock()
	now := d.now()
	var out []lease.Standing
	for _, h := range slices.Sorted(maps.Keys(d.candidates[name])) {
		if c := d.candidates[name][h]; c.Live(now) {
			out = append(out, c.Standing(now))
		}
	}
	return out, nil
}

// Withdraw ends holder's candidacy for name.
func (m *Memory) Withdraw(ctx context.Context, name, holder string) error {
	d, err := m.lock(ctx)
	if err != nil {
		return err
	}
	defer d.mu.Unlock()
	delete(d.candidates[name], holder)
	return nil
}

// Forget deletes name's record and candidates unless name is held.
func (m *Memory) Forget(ctx context.Context, name string) error {
	d, err := m.lock(ctx)
	if err != nil {
		return err
	}
	defer d.mu.Unlock()
	row := d.rows[name]
	if row == nil {
		return lease.ErrNotFound
	}
	if err := lease.Forgettable(row.view(d.now()), d.now()); err != nil {
		return err
	}
	delete(d.rows, name)
	delete(d.candidates, name)
	d.wakeLocked(name)
	return nil
}

// standings reads name's candidates, failing t on an error.
func standings(ctx context.Context, t *testing.T, c lease.Campaigner, name string) map[string]lease.Standing {
	t.Helper()
	list, err := c.Candidates(ctx, name)
	if err != nil {
		t.Fatalf("Candidates(%q): %v", name, err)
	}
	out := make(map[string]lease.Standing)
	for i, s := range list {
		if i > 0 && list[i-1].Holder >= s.Holder {
			t.Errorf("Candidates(%q) not ordered by holder: %q before %q", name, list[i-1].Holder, s.Holder)
		}
		out[s.Holder] = s
	}
	return out
}

// testCandidacy: a candidacy written by Campaign reads back with every
// attribute, measured at the store's now; a refused Acquire afterwards
// keeps it; a candidate recorded by a refused Acquire alone (what a
// leaderrun that does not know Campaign leaves) reads as the zero
// Candidacy; a candidate of another name does not show.
func testCandidacy(t *testing.T, h Harness) {
	s := open(t, h)
	c := s
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ttl = 10 * time.Second
	note := `unhealthy: "disk full" ` + strings.Repeat("é\n", 40)
	note = note[:min(len(note), lease.MaxNote)]
	want := lease.Candidacy{Priority: -7, Preempt: true, Ineligible: time.Minute, Note: note}
	if err := c.Campaign(ctx, "cand", "a", want, ttl); err != nil {
		t.Fatalf("Campaign: %v", err)
	}
	if _, err := s.Acquire(ctx, "cand", "h", ttl); err != nil {
		t.Fatal(err)
	}
	for _, who := range []string{"a", "old"} {
		var held *lease.HeldError
		if _, err := s.Acquire(ctx, "cand", who, ttl); !errors.As(err, &held) {
			t.Fatalf("Acquire of a held name by %s: %v, want a *HeldError", who, err)
		}
	}
	if err := c.Campaign(ctx, "cand-other", "z", lease.Candidacy{Priority: 9}, ttl); err != nil {
		t.Fatal(err)
	}
	got := standings(ctx, t, c, "cand")
	a, ok := got["a"]
	if !ok {
		t.Fatalf("Candidates = %v, want a among them", got)
	}
	if a.Priority != want.Priority || !a.Preempt || a.Note != want.Note {
		t.Errorf("a reads %+v, want %+v", a.Candidacy, want)
	}
	if a.Ineligible <= want.Ineligible-10*time.Second || a.Ineligible > want.Ineligible {
		t.Errorf("a ineligible for %v more, want at most %v and about that", a.Ineligible, want.Ineligible)
	}
	if a.Seen <= ttl || a.Seen > 2*ttl {
		t.Errorf("a seen for %v more, want in (ttl, 2×ttl] = (%v, %v]", a.Seen, ttl, 2*ttl)
	}
	if a.Eligible() {
		t.Error("a ineligible for a minute reads as eligible")
	}
	old, ok := got["old"]
	if !ok {
		t.Fatalf("Candidates = %v, want old (a refused Acquire) among them", got)
	}
	if old.Candidacy != (lease.Candidacy{}) || !old.Eligible() {
		t.Errorf("a candidate that never campaigned reads %+v, want the zero Candidacy", old.Candidacy)
	}
	if _, ok := got["z"]; ok {
		t.Error("a candidate for another name is listed")
	}
	// Campaigning again replaces what was said: eligible, priority 0.
	if err := c.Campaign(ctx, "cand", "a", lease.Candidacy{}, ttl); err != nil {
		t.Fatal(err)
	}
	if a := standings(ctx, t, c, "cand")["a"]; a.Candidacy != (lease.Candidacy{}) {
		t.Errorf("after campaigning with the zero Candidacy a reads %+v", a.Candidacy)
	}
}

// testWithdraw: a withdrawn candidate is no longer listed and cannot be
// named successor; withdrawing one that is no candidate does nothing.
func testWithdraw(t *testing.T, h Harness) {
	s := open(t, h)
	c := s
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ttl = 10 * time.Second
	if _, err := s.Acquire(ctx, "wd", "h", ttl); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, "wd", "b", ttl); err == nil {
		t.Fatal("b acquired a held name")
	}
	if err := c.Campaign(ctx, "wd", "c", lease.Candidacy{Priority: 1}, ttl); err != nil {
		t.Fatal(err)
	}
	if got := standings(ctx, t, c, "wd"); got["b"].Holder == "" || got["c"].Holder == "" {
		t.Fatalf("Candidates = %v, want b and c", got)
	}
	for _, who := range []string{"b", "c", "nobody"} {
		if err := c.Withdraw(ctx, "wd", who); err != nil {
			t.Fatalf("Withdraw(%s): %v", who, err)
		}
	}
	got := standings(ctx, t, c, "wd")
	if _, ok := got["b"]; ok {
		t.Errorf("b still listed after withdrawing: %v", got)
	}
	if _, ok := got["c"]; ok {
		t.Errorf("c still listed after withdrawing: %v", got)
	}
	if _, err := s.RequestStepDown(ctx, "wd", "b", time.Minute); !errors.Is(err, lease.ErrUnknownSuccessor) {
		t.Errorf("step-down to a withdrawn candidate: %v, want ErrUnknownSuccessor", err)
	}
	if rec, err := s.Get(ctx, "wd"); err != nil || rec.Holder != "h" || !rec.Held() {
		t.Errorf("the lease after withdrawals: %+v, %v; want h still holding it", rec, err)
	}
}

// testForget: a held name is not forgotten (a *HeldError naming its
// holder, the record unchanged); a released one is, with its candidates,
// and the next grant's token exceeds the forgotten one; a name with no
// record is ErrNotFound. (The model-based tests check ErrTokenAhead.)
func testForget(t *testing.T, h Harness) {
	s := open(t, h)
	c := s
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const ttl = 10 * time.Second
	rec, err := s.Acquire(ctx, "fg", "h", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Acquire(ctx, "fg", "b", ttl); err == nil {
		t.Fatal("b acquired a held name")
	}
	var held *lease.HeldError
	if err := c.Forget(ctx, "fg"); !errors.As(err, &held) || held.Record.Holder != "h" {
		t.Fatalf("Forget of a held name: %v, want a *HeldError naming h", err)
	}
	if got, err := s.Get(ctx, "fg"); err != nil || got.Token != rec.Token || !got.Held() {
		t.Fatalf("after a refused Forget: %+v, %v; want h's tenure unchanged", got, err)
	}
	if err := s.Release(ctx, "fg", "h", rec.Token); err != nil {
		t.Fatal(err)
	}
	if err := forget(ctx, c, "fg"); err != nil {
		t.Fatalf("Forget of a released name: %v", err)
	}
	if _, err := s.Get(ctx, "fg"); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("Get after Forget: %v, want ErrNotFound", err)
	}
	if got := standings(ctx, t, c, "fg"); len(got) != 0 {
		t.Errorf("candidates after Forget: %v, want none", got)
	}
	for _, r := range mustList(ctx, t, s) {
		if r.Name == "fg" {
			t.Errorf("List still shows the forgotten name: %+v", r)
		}
	}
	if err := c.Forget(ctx, "fg"); !errors.Is(err, lease.ErrNotFound) {
		t.Errorf("Forget of a name with no record: %v, want ErrNotFound", err)
	}
	next, err := s.Acquire(ctx, "fg", "b", ttl)
	if err != nil {
		t.Fatalf("Acquire after Forget: %v", err)
	}
	if next.Token <= rec.Token {
		t.Errorf("token after Forget %d, want above the forgotten %d", next.Token, rec.Token)
	}
}

// testForgetWakesWaiter: a follower waiting on another handle learns at
// once that the name it waits on was forgotten, as of a release.
func testForgetWakesWaiter(t *testing.T, h Harness) {
	a, b := open(t, h), open(t, h)
	mustRelease(t, a, mustAcquire(t, a, "n", "a", ttl))
	seen, err := b.Get(ctx(t), "n")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	woke := waitInBackground(t, b, "n", seen)
	h.listening(t, b, "n")
	forgotten := time.Now()
	if err := forget(ctx(t), a, "n"); err != nil {
		t.Fatalf("Forget of a released name: %v", err)
	}
	wantWoken(t, woke, forgotten)
}

// forget is Forget, tried again while the store says the token is ahead
// of its clock (the release came within its millisecond).
func forget(ctx context.Context, c lease.Campaigner, name string) error {
	for {
		err := c.Forget(ctx, name)
		if !errors.Is(err, lease.ErrTokenAhead) || ctx.Err() != nil {
			return err
		}
		time.Sleep(time.Millisecond)
	}
}

func mustList(ctx context.Context, t *testing.T, s lease.Store) []lease.Record {
	t.Helper()
	list, err := s.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return list
}
