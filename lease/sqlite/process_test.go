package sqlite

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const processes = 8

// startRace starts n helpers of mode, waits until each is ready, then
// lets them all go at once.
func startRace(t *testing.T, mode, path string, n int) []*helper {
	hs := make([]*helper, n)
	for i := range hs {
		hs[i] = startHelper(t, fmt.Sprintf("%s-%d", mode, i), mode, path)
	}
	for _, h := range hs {
		h.expect("ready")
	}
	for _, h := range hs {
		h.send("go")
	}
	return hs
}

func TestProcessesOpenAtOnce(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "leaderrun.db")
	for _, h := range startRace(t, "race-open", path, processes) {
		h.expect("opened")
		if err := h.wait(); err != nil {
			t.Errorf("helper %s: %v; stderr:\n%s", h.name, err, h.stderr.String())
		}
	}
}

func TestProcessesExactlyOneAcquires(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaderrun.db")
	var winners, losers []string
	told := map[string]bool{}
	for _, h := range startRace(t, "race-acquire", path, processes) {
		select {
		case line, ok := <-h.lines:
			if !ok {
				t.Fatalf("helper %s ended early; stderr:\n%s", h.name, h.stderr.String())
			}
			f := strings.Fields(line)
			switch {
			case len(f) == 3 && f[0] == "won":
				winners = append(winners, f[1])
			case len(f) == 3 && f[0] == "held":
				losers = append(losers, h.name)
				told[f[1]] = true
			default:
				t.Errorf("helper %s said %q, want won or held", h.name, line)
			}
		case <-time.After(helperTimeout):
			t.Fatalf("helper %s did not report", h.name)
		}
	}
	if len(winners) != 1 {
		t.Fatalf("winners = %v, want exactly one of %d processes", winners, processes)
	}
	if got, want := len(losers), processes-1; got != want {
		t.Errorf("%d processes were refused, want %d", got, want)
	}
	if len(told) != 1 || !told[winners[0]] {
		t.Errorf("losers were told holders %v, want only %s", told, winners[0])
	}
}

func TestProcessTakesOverFromKilledHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaderrun.db")
	dier := startHelper(t, "dier", "hold-and-die", path)
	f := strings.Fields(dier.expect("acquired"))
	firstToken, _ := strconv.ParseInt(f[1], 10, 64)
	expires, _ := strconv.ParseInt(f[2], 10, 64)
	err := dier.wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("holder ended with %v, want killed by SIGKILL", err)
	}

	taker := startHelper(t, "taker", "take-over", path)
	var line string
	for line = taker.expect(""); strings.HasPrefix(line, "held "); line = taker.expect("") {
		if got, want := strings.TrimPrefix(line, "held "), "dier"; got != want {
			t.Errorf("taker was refused by %q, want %q", got, want)
		}
	}
	f = strings.Fields(line)
	if len(f) != 3 || f[0] != "acquired" {
		t.Fatalf("taker said %q, want acquired", line)
	}
	token, _ := strconv.ParseInt(f[1], 10, 64)
	acquired, _ := strconv.ParseInt(f[2], 10, 64)
	if token <= firstToken {
		t.Errorf("token after takeover = %d, want > %d", token, firstToken)
	}
	// Both times are store-clock milliseconds converted to wall time by
	// different processes; allow for the conversion's jitter.
	if early := time.Duration(expires - acquired); early > 2*time.Millisecond {
		t.Errorf("taker acquired %v before the killed holder's lease expired", early)
	}
}

func TestReleaseWakesWaiterInAnotherProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaderrun.db")
	s := openTest(t, path)
	waiter := startHelper(t, "waiter", "wait", path)
	waiter.expect("ready")
	const rounds = 5
	var lags []time.Duration
	for i := range rounds {
		rec, err := s.Acquire(ctx(t), "handoff", fmt.Sprintf("leader-%d", i), time.Minute)
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		waiter.send("wait")
		waiter.expect("waiting")
		// A renewal changes the row but not its holder: no wake-up.
		if _, err := s.Renew(ctx(t), "handoff", rec.Holder, rec.Token, time.Minute); err != nil {
			t.Fatalf("Renew: %v", err)
		}
		released := time.Now()
		if err := s.Release(ctx(t), "handoff", rec.Holder, rec.Token); err != nil {
			t.Fatalf("Release: %v", err)
		}
		woke, _ := strconv.ParseInt(strings.TrimPrefix(waiter.expect("woke "), "woke "), 10, 64)
		lags = append(lags, time.Unix(0, woke).Sub(released))
	}
	t.Logf("release → wake-up in another process, %d rounds: %v", rounds, lags)
	if worst := slices.Max(lags); worst > 500*time.Millisecond {
		t.Errorf("slowest wake-up %v after release, want under 500ms (poll interval %v)", worst, pollInterval)
	}
	if best := slices.Min(lags); best < 0 {
		t.Errorf("waiter woke %v before the release", -best)
	}
}

// TestBusyNamesTheLockHolder: when another process holds the database's
// write lock past busy_timeout (a leader frozen in the middle of a
// commit), the error names that process.
func TestBusyNamesTheLockHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "leaderrun.db")
	s := openTest(t, path)
	rec, err := s.Acquire(ctx(t), "n", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	locker := startHelper(t, "locker", "write-lock", path)
	locker.expect("locked")
	_, err = s.Renew(ctx(t), "n", "a", rec.Token, time.Minute)
	if err == nil {
		t.Fatal("Renew succeeded while another process held the write lock")
	}
	if want := fmt.Sprintf("the write lock is held by pid %d", locker.cmd.Process.Pid); !strings.Contains(err.Error(), want) {
		t.Errorf("Renew = %v, want it to say %q", err, want)
	}
}
