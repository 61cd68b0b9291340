package replica

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leaderrun/leaderrun/config"
	"github.com/leaderrun/leaderrun/lease"
)

// The health check in the single-name loop, in synctest bubbles against
// the in-memory store, with a check that fails while sick is set.

// withHealth gives the loop a check every second, unhealthy after three
// failures in a row; the check fails while sick is set.
func withHealth(sick *lockedBool) func(*loop) {
	return func(lp *loop) {
		lp.l.cfg.Health = config.Health{Cmd: "check", Interval: time.Second, Timeout: time.Second, Retries: 3, Cooldown: 5 * time.Minute}
		lp.l.check = func(ctx context.Context, cmd string, env []string, timeout time.Duration, log *slog.Logger) checkResult {
			if sick.get() {
				return checkResult{why: "exit status 1", output: "disk\x1b[2J gone\n"}
			}
			return checkResult{ok: true, why: "exit status 0"}
		}
	}
}

// lockedBool is a flag the test sets while the loop reads it.
type lockedBool struct{ ch chan bool }

func newLockedBool() *lockedBool {
	b := &lockedBool{ch: make(chan bool, 1)}
	b.ch <- false
	return b
}
func (b *lockedBool) get() bool  { v := <-b.ch; b.ch <- v; return v }
func (b *lockedBool) set(v bool) { <-b.ch; b.ch <- v }

// candidate makes holder a live candidate of "relay" with c, as its
// replica's Elector publishes it.
func candidate(t *testing.T, m *lease.Campaigner, holder string, c lease.Candidacy) {
	t.Helper()
	if err := (*m).Campaign(context.Background(), "relay", holder, c, time.Minute); err != nil {
		t.Fatal(err)
	}
}

func standing(t *testing.T, cs lease.Campaigner, holder string) lease.Standing {
	t.Helper()
	list, err := cs.Candidates(context.Background(), "relay")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list {
		if s.Holder == holder {
			return s
		}
	}
	t.Fatalf("%s is no candidate of relay: %+v", holder, list)
	return lease.Standing{}
}

func TestLoopUnhealthyHandsOverThroughTheOrderedHandOver(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sick := newLockedBool()
		lp := startLoop(t, nil, withHealth(sick))
		first := lp.next(time.Second)
		var cs lease.Campaigner = lp.m
		candidate(t, &cs, "b", lease.Candidacy{Priority: 1})
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if len(lp.ev.list()) != 1 {
			t.Fatalf("events %q while healthy: want the start alone", lp.ev.list())
		}
		sick.set(true)
		time.Sleep(3 * time.Second) // three failed checks
		synctest.Wait()
		<-first.Done()
		rec, err := lp.m.Get(context.Background(), "relay")
		if err != nil {
			t.Fatal(err)
		}
		if !rec.Released || rec.Successor != "b" || rec.Reserved <= 0 {
			t.Errorf("record after the hand-over %+v: want released, reserved for b", rec)
		}
		if !lp.ev.before("stopped 0", "released") {
			t.Errorf("events %q: want the command stopped, then the release", lp.ev.list())
		}
		a := standing(t, cs, "a")
		if a.Eligible() || a.Ineligible > 5*time.Minute || !strings.Contains(a.Note, `command unhealthy after 3 failed checks (exit status 1): "disk\x1b[2J gone"`) {
			t.Errorf("a's candidacy %+v: want ineligible for the cooldown, with the escaped output", a)
		}
		if strings.ContainsRune(a.Note, 0x1b) {
			t.Errorf("a's note %q holds a raw escape", a.Note)
		}
		// b, a live eligible candidate, is the one to take the name:
		// a starts nothing meanwhile.
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if got := lp.ev.list(); strings.Contains(strings.Join(got, ";"), "started 1") {
			t.Errorf("events %q: a started a command again within the reservation for b", got)
		}
		lp.end()
	})
}

func TestLoopUnhealthyWithoutSuccessorRestartsTheCommand(t *testing.T) {
	for _, tc := range []struct {
		name   string
		others func(t *testing.T, cs lease.Campaigner)
	}{
		{"alone", func(*testing.T, lease.Campaigner) {}},
		{"the standby is ineligible", func(t *testing.T, cs lease.Campaigner) {
			candidate(t, &cs, "b", lease.Candidacy{Priority: 9, Ineligible: time.Hour, Note: "handed over"})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				sick := newLockedBool()
				lp := startLoop(t, nil, withHealth(sick))
				first := lp.next(time.Second)
				var cs lease.Campaigner = lp.m
				tc.others(t, cs)
				sick.set(true)
				time.Sleep(3 * time.Second)
				synctest.Wait()
				<-first.Done()
				sick.set(false)
				lp.next(10 * time.Second) // restarted after the restart delay
				want := []string{"started 0", "stopped 0", "released", "started 1"}
				for i := 1; i < len(want); i++ {
					if !lp.ev.before(want[i-1], want[i]) {
						t.Errorf("events %q: want %q before %q", lp.ev.list(), want[i-1], want[i])
					}
				}
				rec, err := lp.m.Get(context.Background(), "relay")
				if err != nil {
					t.Fatal(err)
				}
				if rec.Holder != "a" || !rec.Held() {
					t.Errorf("record %+v: want a holding the name again", rec)
				}
				if a := standing(t, cs, "a"); !a.Eligible() {
					t.Errorf("a's candidacy %+v: want eligible, as nobody else can take the name", a)
				}
				lp.end()
			})
		})
	}
}
