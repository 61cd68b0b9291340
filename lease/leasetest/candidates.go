package leasetest

import (
	"context"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

var _ lease.CandidateReader = (*Memory)(nil)

// OtherCandidates reports whether a holder other than holder is a live
// candidate for name.
func (m *Memory) OtherCandidates(ctx context.Context, name, holder string) (bool, error) {
	d, err := m.lock(ctx)
	if err != nil {
		return false, err
	}
	defer d.mu.Unlock()
	now := d.now()
	for h, c := range d.candidates[name] {
		if h != holder && c.Live(now) {
			return true, nil
		}
	}
	return false, nil
}

// CheckCandidateReader checks s's OtherCandidates on a name nobody used
// before: no other candidate while only the holder took part; the holder
// of a refused Acquire is one for the holder; a candidate for another name
// does not count. (A store may record every Acquire's holder, the
// successful one's too: the holder may count as a candidate for b.)
func CheckCandidateReader(t *testing.T, s lease.Store) {
	t.Helper()
	cr, ok := s.(lease.CandidateReader)
	if !ok {
		t.Fatalf("%T is not a lease.CandidateReader", s)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	check := func(name, holder string, want bool) {
		t.Helper()
		got, err := cr.OtherCandidates(ctx, name, holder)
		if err != nil {
			t.Fatalf("OtherCandidates(%q, %q): %v", name, holder, err)
		}
		if got != want {
			t.Errorf("OtherCandidates(%q, %q) = %v, want %v", name, holder, got, want)
		}
	}
	if _, err := s.Acquire(ctx, "cand", "a", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	check("cand", "a", false)
	if _, err := s.Acquire(ctx, "cand", "b", 10*time.Second); err == nil {
		t.Fatal("b acquired a held name")
	}
	check("cand", "a", true)
	check("cand-other", "a", false)
}
