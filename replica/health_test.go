package replica

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leaderrun/leaderrun/config"
	"github.com/leaderrun/leaderrun/lease"
)

// script is a fake check that answers with the results in order (the last
// one again once they run out) and records when each ran.
type script struct {
	mu      sync.Mutex // guards the fields below
	results []bool
	ran     []time.Time
}

func (s *script) run(context.Context) checkResult {
	s.mu.Lock()
	defer s.mu.Unlock()
	ok := s.results[min(len(s.ran), len(s.results)-1)]
	s.ran = append(s.ran, time.Now())
	return checkResult{ok: ok, why: fmt.Sprintf("check %d", len(s.ran))}
}

func (s *script) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.ran)
}

func TestCheckerUnhealthyAfterRetriesInARow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// fail, pass (the count starts again), then three failures.
		sc := &script{results: []bool{false, true, false, false, false}}
		ck := &checker{cfg: config.Health{Interval: time.Second, Timeout: time.Second, Retries: 3, StartPeriod: 10 * time.Second}, run: sc.run}
		start := time.Now()
		res, unhealthy := ck.watch(context.Background())
		if !unhealthy {
			t.Fatal("watch returned healthy")
		}
		if got, want := res.why, "check 5"; got != want {
			t.Errorf("the last failed check = %q, want %q", got, want)
		}
		if got, want := time.Since(start), 10*time.Second+5*time.Second; got != want {
			t.Errorf("unhealthy after %v, want the start period and five intervals, %v", got, want)
		}
	})
}

func TestCheckerWaitsTheStartPeriod(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := &script{results: []bool{false}}
		ck := &checker{cfg: config.Health{Interval: time.Second, Timeout: time.Second, Retries: 1, StartPeriod: time.Minute}, run: sc.run}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan bool, 1)
		go func() { _, u := ck.watch(ctx); done <- u }()
		time.Sleep(time.Minute + time.Second - time.Nanosecond)
		synctest.Wait()
		if n := sc.count(); n != 0 {
			t.Errorf("%d checks ran before the start period and an interval passed", n)
		}
		time.Sleep(time.Nanosecond)
		if u := <-done; !u {
			t.Error("watch returned healthy")
		}
		if n := sc.count(); n != 1 {
			t.Errorf("%d checks ran, want 1", n)
		}
		cancel()
	})
}

func TestCheckerEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		sc := &script{results: []bool{true}}
		ck := &checker{cfg: config.Health{Interval: time.Second, Timeout: time.Second, Retries: 1}, run: sc.run}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second+time.Millisecond)
		defer cancel()
		if _, unhealthy := ck.watch(ctx); unhealthy {
			t.Error("watch of a healthy command said unhealthy")
		}
		if n := sc.count(); n != 10 {
			t.Errorf("%d checks in 10s at 1s intervals, want 10", n)
		}
	})
}

// A check that outlives its timeout fails, and its whole group is killed
// (a background sleep included).
func TestRunCheckTimeoutKillsItsGroup(t *testing.T) {
	dir := t.TempDir()
	pidfile := filepath.Join(dir, "bg.pid")
	res := runCheck(context.Background(), "sleep 300 & echo $! > "+pidfile+"; echo started; wait", os.Environ(), 300*time.Millisecond, slog.New(slog.DiscardHandler))
	if res.ok || !strings.HasPrefix(res.why, "timed out after 300ms") {
		t.Errorf("check = %+v, want a failure by timeout", res)
	}
	if got, want := res.output, "started\n"; got != want {
		t.Errorf("output = %q, want %q", got, want)
	}
	b, err := os.ReadFile(pidfile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(30 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the check's background sleep %d outlived the check's timeout", pid)
		}
	}
}

func TestRunCheckThatCannotStartFails(t *testing.T) {
	res := runShell(context.Background(), "/nonexistent/sh", "true", nil, time.Second, slog.New(slog.DiscardHandler))
	if res.ok || !strings.HasPrefix(res.why, "could not start: ") {
		t.Errorf("check = %+v, want a failure that says it could not start", res)
	}
}

func TestRunCheckBoundsItsOutput(t *testing.T) {
	res := runCheck(context.Background(), `head -c 3000000 /dev/zero | tr '\0' '\033'; printf 'x\n' >&2; exit 3`, os.Environ(), 30*time.Second, slog.New(slog.DiscardHandler))
	if res.ok || res.why != "exit status 3" {
		t.Errorf("check = %+v, want exit status 3", res)
	}
	if got, want := len(res.output), maxCheckOutput; got != want {
		t.Errorf("kept %d bytes of output, want %d", got, want)
	}
	if got, want := res.more, int64(3000002-maxCheckOutput); got != want {
		t.Errorf("counted %d bytes left out, want %d", got, want)
	}
	shown := res.shownOutput()
	if strings.ContainsRune(shown, 0x1b) || !strings.Contains(shown, `\x1b\x1b`) || !strings.HasSuffix(shown, fmt.Sprintf("(and %d more bytes)", res.more)) {
		t.Errorf("shown output %.80q… is not escaped and counted", shown)
	}
}

func TestBoundNote(t *testing.T) {
	long := strings.Repeat("é", lease.MaxNote)
	for _, tc := range []struct{ in, want string }{
		{"ok", "ok"},
		{"a\nb\x1bc\xff", "a?b?c?"},
	} {
		if got := boundNote(tc.in); got != tc.want {
			t.Errorf("boundNote(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	if got := boundNote(long); len(got) > lease.MaxNote || !strings.HasSuffix(got, "…") || !strings.HasPrefix(got, "éé") {
		t.Errorf("boundNote of %d bytes = %d bytes %q…", len(long), len(got), got[:8])
	}
}
