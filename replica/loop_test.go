package replica

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leaderrun/leaderrun/config"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
	"github.com/leaderrun/leaderrun/samehost"
	"github.com/leaderrun/leaderrun/supervise"
)

// The single-name loop's tests run in synctest bubbles against the in-memory
// store, with fake children that record what happened to them in one
// event log shared with the store: the order of "stopped" and "released"
// is the property under test.

func TestRestartDelay(t *testing.T) {
	tests := []struct {
		base     time.Duration
		failures int
		want     time.Duration
	}{
		{time.Second, 0, time.Second},
		{time.Second, 1, time.Second},
		{time.Second, 2, 2 * time.Second},
		{time.Second, 6, 32 * time.Second},
		{time.Second, 7, maxRestartDelay},
		{time.Second, 34, maxRestartDelay},
		{time.Second, 35, maxRestartDelay},
		{time.Second, 64, maxRestartDelay},
		{time.Second, 1000, maxRestartDelay},
		{0, 0, 0},
		{0, 1, 0},
		{0, 2, 2 * minRestartBackoff},
		{0, 3, 4 * minRestartBackoff},
		{0, 1000, maxRestartDelay},
		{time.Hour, 1, maxRestartDelay},
		{time.Hour, 64, maxRestartDelay},
		{-time.Second, 5, 16 * minRestartBackoff},
	}
	for _, tc := range tests {
		if got := restartDelay(tc.base, tc.failures); got != tc.want {
			t.Errorf("restartDelay(%v, %d) = %v, want %v", tc.base, tc.failures, got, tc.want)
		}
	}
}

// events is the log the fakes write to.
type events struct {
	mu  sync.Mutex // guards log
	log []string
}

func (e *events) add(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.log = append(e.log, fmt.Sprintf(format, args...))
}

func (e *events) list() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.log)
}

// before reports whether both an event starting with a and one starting
// with b were logged, the first of a's before the first of b's.
func (e *events) before(a, b string) bool {
	ia, ib := -1, -1
	for i, ev := range e.list() {
		if ia < 0 && strings.HasPrefix(ev, a) {
			ia = i
		}
		if ib < 0 && strings.HasPrefix(ev, b) {
			ib = i
		}
	}
	return ia >= 0 && ib >= 0 && ia < ib
}

// fakeChild is a command that runs until the test makes it exit or the
// loop stops it; it dies of the signal it is stopped with.
type fakeChild struct {
	n    int // how many children were started before this one
	ev   *events
	done chan struct{}

	mu     sync.Mutex // guards status and closed
	status supervise.Status
	closed bool
}

func (c *fakeChild) Pid() int                    { return 1000 + c.n }
func (c *fakeChild) Done() <-chan struct{}       { return c.done }
func (c *fakeChild) Signal(syscall.Signal) error { return nil }
func (c *fakeChild) Stop() supervise.Status      { return c.StopWith(syscall.SIGTERM) }
func (c *fakeChild) Deliver(syscall.Signal)      {}

func (c *fakeChild) StopWith(sig syscall.Signal) supervise.Status {
	c.end(supervise.Status{Signal: sig})
	c.ev.add("stopped %d", c.n)
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.status
}

// exit makes the child exit on its own with code.
func (c *fakeChild) exit(code int) {
	c.ev.add("exited %d", c.n)
	c.end(supervise.Status{Code: code})
}

func (c *fakeChild) end(st supervise.Status) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.closed {
		c.closed, c.status = true, st
		close(c.done)
	}
}

// starter starts fake children and hands each to the test.
type starter struct {
	ev      *events
	mu      sync.Mutex // guards n and fail
	n       int
	fail    error // when set, the next start fails with it
	started chan *fakeChild
}

func (s *starter) start(spec supervise.Spec) (child, error) {
	s.mu.Lock()
	n, fail := s.n, s.fail
	s.fail = nil
	s.n++
	s.mu.Unlock()
	if fail != nil {
		s.ev.add("failed to start %d", n)
		return nil, fail
	}
	c := &fakeChild{n: n, ev: s.ev, done: make(chan struct{})}
	s.ev.add("started %d token=%s", n, envValue(spec.Env, "LEADERRUN_TOKEN"))
	s.started <- c
	return c, nil
}

func envValue(env []string, key string) string {
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, key+"="); ok {
			return v
		}
	}
	return ""
}

// loggingStore logs every release into the event log.
type loggingStore struct {
	*leasetest.Memory
	ev *events
}

func (s loggingStore) Release(ctx context.Context, name, holder string, token int64) error {
	err := s.Memory.Release(ctx, name, holder, token)
	s.ev.add("released err=%v", err)
	return err
}

// loop is a single-name loop under test.
type loop struct {
	t     *testing.T
	l     *single
	m     *leasetest.Memory
	ev    *events
	st    *starter
	start time.Time
	errc  chan error
}

func testTiming() config.Timing {
	return config.Timing{LeaseDuration: 15 * time.Second, RenewDeadline: 8 * time.Second,
		RetryPeriod: 2 * time.Second, KillGrace: 5 * time.Second}
}

// startLoop runs a single-name loop for holder "a" of "relay"; adjust changes
// its configuration first, and each of before is applied before it starts.
func startLoop(t *testing.T, adjust func(*Config), before ...func(*loop)) *loop {
	ev := &events{}
	m := &leasetest.Memory{}
	rc := Config{Config: config.Config{Name: "relay", Timing: testTiming(),
		RestartDelay: time.Second, Command: []string{"cmd"}}, StopSignal: syscall.SIGTERM}
	if adjust != nil {
		adjust(&rc)
	}
	lp := &loop{t: t, m: m, ev: ev, st: &starter{ev: ev, started: make(chan *fakeChild)},
		start: time.Now(), errc: make(chan error, 1)}
	lp.l = newSingle(newReplica(rc, "a", slog.New(slog.DiscardHandler)))
	lp.l.start = lp.st.start
	lp.l.clock = func() time.Duration { return time.Since(lp.start) }
	lp.l.useStore(loggingStore{Memory: m, ev: ev})
	for _, b := range before {
		b(lp)
	}
	go func() { lp.errc <- lp.l.loop() }()
	return lp
}

// next returns the next child started, failing after limit.
func (lp *loop) next(limit time.Duration) *fakeChild {
	lp.t.Helper()
	select {
	case c := <-lp.st.started:
		return c
	case <-time.After(limit):
		lp.t.Fatalf("no child started within %v; events %q", limit, lp.ev.list())
		return nil
	}
}

// end stops the loop if it still runs and returns what it returned.
func (lp *loop) end() error {
	lp.l.stop(0)
	select {
	case err := <-lp.errc:
		return err
	case <-time.After(time.Hour):
		lp.t.Fatal("the loop did not end on a stop")
		return nil
	}
}

func TestLoopLostTenureStopsChildBeforeRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lp := startLoop(t, nil)
		first := lp.next(time.Second)
		time.Sleep(3 * time.Second)
		// Another holder takes the name behind the leader's back; its next
		// renew (at 4s) is told the lease is lost.
		lp.m.Delete("relay")
		if _, err := lp.m.Acquire(context.Background(), "relay", "thief", time.Minute); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		time.Sleep(2 * time.Second)
		synctest.Wait()
		<-first.Done()
		if !lp.ev.before("stopped 0", "released") {
			t.Errorf("events %q: want the child stopped before the release", lp.ev.list())
		}
		if err := lp.end(); !errors.Is(err, context.Canceled) {
			t.Errorf("loop after a stop while standing by = %v, want context.Canceled (exit 0)", err)
		}
	})
}

func TestLoopChildExitStopsLeftoversBeforeRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lp := startLoop(t, nil)
		lp.next(time.Second).exit(1)
		lp.next(10 * time.Second) // campaigns again after the restart delay
		// Stop (which kills what the command left behind) before the
		// release, and the release before the next start.
		want := []string{"exited 0", "stopped 0", "released", "started 1"}
		for i := 1; i < len(want); i++ {
			if !lp.ev.before(want[i-1], want[i]) {
				t.Errorf("events %q: want %q before %q", lp.ev.list(), want[i-1], want[i])
			}
		}
		lp.end()
	})
}

func TestLoopStopDuringRestartDelayExitsZero(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lp := startLoop(t, func(rc *Config) { rc.RestartDelay = time.Minute })
		lp.next(time.Second).exit(3)
		time.Sleep(10 * time.Second)
		synctest.Wait() // in the restart delay
		if err := lp.end(); !errors.Is(err, context.Canceled) {
			t.Errorf("loop stopped during the restart delay = %v, want context.Canceled (exit 0: cmd's TestExitCode)", err)
		}
	})
}

func TestLoopOnceExitsWithChildStatusAndReleases(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lp := startLoop(t, func(rc *Config) { rc.Once = true })
		lp.next(time.Second).exit(3)
		var err error
		select {
		case err = <-lp.errc:
		case <-time.After(time.Hour):
			t.Fatal("--once loop did not end after its child exited")
		}
		var exit *Exit
		if !errors.As(err, &exit) || exit.Status.Code != 3 {
			t.Errorf("--once loop = %v, want the child's exit status 3", err)
		}
		rec, gerr := lp.m.Get(context.Background(), "relay")
		if gerr != nil || !rec.Released {
			t.Errorf("after --once, record = %+v, %v; want released", rec, gerr)
		}
	})
}

func TestLoopStopSignalStopsChildAndExitsWithItsStatus(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lp := startLoop(t, nil)
		lp.next(time.Second)
		time.Sleep(5 * time.Second)
		lp.l.stop(syscall.SIGINT)
		err := <-lp.errc
		var exit *Exit
		if !errors.As(err, &exit) || exit.Status.Signal != syscall.SIGINT {
			t.Errorf("loop after SIGINT = %v, want the child killed by SIGINT", err)
		}
		if !lp.ev.before("stopped 0", "released") {
			t.Errorf("events %q: want the child stopped before the release", lp.ev.list())
		}
	})
}

func TestLoopBacksOffOnRepeatedFailures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lp := startLoop(t, nil)
		// Forty failures in a row: past the 35th, where a shift of 1s
		// overflows, the delay must stay at its cap.
		const failures = 40
		var gaps, want []time.Duration
		prev := time.Now()
		c := lp.next(time.Second)
		for i := range failures {
			c.exit(1)
			c = lp.next(2 * maxRestartDelay)
			gaps = append(gaps, time.Since(prev))
			w := maxRestartDelay // 1s, 2s, 4s, … 32s, then the cap
			if i < 6 {
				w = time.Second << i
			}
			want = append(want, w)
			prev = time.Now()
		}
		// A success resets the back-off: a clean exit after a run, not
		// at once (TestLoopBacksOffOnCleanExitsAtOnce).
		time.Sleep(quickExit)
		c.exit(0)
		lp.next(2 * maxRestartDelay)
		gaps = append(gaps, time.Since(prev))
		want = append(want, quickExit+time.Second)
		if !slices.Equal(gaps, want) {
			t.Errorf("gaps between starts = %v, want %v", gaps, want)
		}
		lp.end()
	})
}

// A command that exits 0 at once (it daemonized, or has nothing to do)
// loops as a crashing one does when restarted: it backs off the same way
// and is warned about, instead of restarting silently every restart delay.
func TestLoopBacksOffOnCleanExitsAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lp := startLoop(t, nil)
		var gaps []time.Duration
		prev := time.Now()
		c := lp.next(time.Second)
		for range 4 {
			c.exit(0)
			c = lp.next(2 * maxRestartDelay)
			gaps = append(gaps, time.Since(prev))
			prev = time.Now()
		}
		if want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}; !slices.Equal(gaps, want) {
			t.Errorf("gaps between starts of a command that exits 0 at once = %v, want %v", gaps, want)
		}
		lp.end()
	})
}

func TestLoopTokensIncreaseAcrossTenures(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lp := startLoop(t, func(rc *Config) { rc.RestartDelay = 0 })
		for range 3 {
			lp.next(time.Minute).exit(0)
		}
		lp.next(time.Minute)
		lp.end()
		var last int64
		for _, ev := range lp.ev.list() {
			var n int
			var token int64
			if _, err := fmt.Sscanf(ev, "started %d token=%d", &n, &token); err != nil {
				continue
			}
			if token <= last {
				t.Errorf("child %d got token %d, want > %d", n, token, last)
			}
			last = token
		}
	})
}

// TestLoopFailedStartEndsTheTenureNotLeaderrun: a command that cannot
// start (no file descriptors left, a binary being replaced) hands the name
// back and is tried again after the restart delay; leaderrun goes on.
func TestLoopFailedStartEndsTheTenureNotLeaderrun(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lp := startLoop(t, nil, func(lp *loop) { lp.st.fail = fmt.Errorf("start %q: %w", "cmd", syscall.EMFILE) })
		c := lp.next(time.Minute)
		if !lp.ev.before("failed to start 0", "released") || !lp.ev.before("released", "started 1") {
			t.Errorf("events %q: want the failed start, the release, then a new start", lp.ev.list())
		}
		select {
		case err := <-lp.errc:
			t.Fatalf("the loop ended with %v after a failed start", err)
		default:
		}
		c.exit(0)
		lp.end()
	})
}

// TestLoopHoldAtLeastKeepsTheNameAfterTheChild: with --hold-at-least, the
// name stays this replica's for that long after it was acquired, also
// after the command exited, and is then left to expire, never released.
func TestLoopHoldAtLeastKeepsTheNameAfterTheChild(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lp := startLoop(t, func(rc *Config) { rc.Once, rc.HoldAtLeast = true, time.Minute })
		start := time.Now()
		lp.next(time.Second).exit(0)
		other := lp.m.Handle()
		time.Sleep(50 * time.Second)
		if _, err := other.Acquire(context.Background(), "relay", "b", time.Minute); !errors.As(err, new(*lease.HeldError)) {
			t.Errorf("another replica's Acquire 50s after the command exited = %v, want refused: the name is held for a minute", err)
		}
		var err error
		select {
		case err = <-lp.errc:
		case <-time.After(time.Hour):
			t.Fatal("the --once loop did not end after the hold")
		}
		var exit *Exit
		if !errors.As(err, &exit) || exit.Status.Code != 0 {
			t.Errorf("loop = %v, want the command's exit status 0", err)
		}
		if held := time.Since(start); held < time.Minute {
			t.Errorf("the loop ended %v after the election, want at least --hold-at-least (1m)", held)
		}
		for _, ev := range lp.ev.list() {
			if strings.HasPrefix(ev, "released") {
				t.Errorf("events %q: the lease was released, want it left to expire", lp.ev.list())
			}
		}
		rec, err := other.Get(context.Background(), "relay")
		if err != nil || !rec.Held() || rec.Holder != "a" {
			t.Errorf("right after the hold, record = %+v, %v; want still held by a until it expires", rec, err)
		}
		time.Sleep(rec.Remaining + time.Millisecond)
		if _, err := other.Acquire(context.Background(), "relay", "b", time.Minute); err != nil {
			t.Errorf("Acquire once the lease expired: %v", err)
		}
	})
}

// startedChild is a fakeChild that knows its start time, as
// supervise.Child does.
type startedChild struct{ *fakeChild }

func (c startedChild) StartTime() uint64 { return 4242 }

func TestLoopRecordsWhereItsCommandRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lp := startLoop(t, nil, func(lp *loop) {
			start := lp.l.start
			lp.l.start = func(spec supervise.Spec) (child, error) {
				c, err := start(spec)
				if err != nil {
					return nil, err
				}
				return startedChild{c.(*fakeChild)}, nil
			}
		})
		c := lp.next(time.Second)
		synctest.Wait()
		rec, err := lp.m.Get(context.Background(), "relay")
		if err != nil {
			t.Fatal(err)
		}
		if rec.Where != "" {
			t.Errorf("where = %q at the command's start, want it recorded %v later", rec.Where, annotateAfter)
		}
		time.Sleep(annotateAfter)
		synctest.Wait()
		if rec, err = lp.m.Get(context.Background(), "relay"); err != nil {
			t.Fatal(err)
		}
		w, err := samehost.Parse(rec.Where)
		if err != nil {
			t.Fatalf("the leader's record = %+v: %v", rec, err)
		}
		if w.Pid != os.Getpid() || w.Child != c.Pid() || w.ChildStart != 4242 || w.Pgid != c.Pid() {
			t.Errorf("where = %+v, want this process (%d) with its command %d started at tick 4242, leading its group",
				w, os.Getpid(), c.Pid())
		}
		lp.end()
	})
}

// readTimes is a store that records when the store was read (Get, Wait),
// and counts its candidates reads.
type readTimes struct {
	loggingStore
	mu         sync.Mutex
	reads      []time.Time
	candidates int
}

func (s *readTimes) Candidates(ctx context.Context, name string) ([]lease.Standing, error) {
	s.mu.Lock()
	s.candidates++
	s.mu.Unlock()
	return s.loggingStore.Candidates(ctx, name)
}

func (s *readTimes) read() {
	s.mu.Lock()
	s.reads = append(s.reads, time.Now())
	s.mu.Unlock()
}

func (s *readTimes) Get(ctx context.Context, name string) (lease.Record, error) {
	s.read()
	return s.loggingStore.Get(ctx, name)
}

func (s *readTimes) Wait(ctx context.Context, name string, seen lease.Record, timeout time.Duration) error {
	s.read()
	return s.loggingStore.Wait(ctx, name, seen, timeout)
}

// startReadLoop is startLoop on a readTimes store.
func startReadLoop(t *testing.T) (*loop, *readTimes) {
	var store *readTimes
	lp := startLoop(t, nil, func(lp *loop) {
		store = &readTimes{loggingStore: loggingStore{Memory: lp.m, ev: lp.ev}}
		lp.l.useStore(store)
	})
	return lp, store
}

// firstSince is the time from t to the first read at or after it.
func (s *readTimes) firstSince(t time.Time) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.reads {
		if !r.Before(t) {
			return r.Sub(t), true
		}
	}
	return 0, false
}

// A leader stopped by a signal keeps its store open after its release
// until the successor's command runs (its record shows a newer tenure and
// where it runs), or for successorWait when none comes: closing a server
// store's connections at once competed with the successor's start. It
// leaves the store alone for successorQuiet first: its reads, too,
// competed with the successor's. It waits only while another replica
// campaigns (a live candidate for the name); with none it returns at its
// release, without another read.
func TestLoopStopWaitsForTheSuccessorsCommand(t *testing.T) {
	for _, tc := range []struct {
		name                string
		candidate, acquires bool
	}{
		{"successor", true, true},
		{"candidate that never comes", true, false},
		{"nobody campaigns", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lp, store := startReadLoop(t)
				lp.next(time.Second)
				ctx := context.Background()
				if tc.candidate {
					// b campaigns: its Acquire is refused while the leader holds the name.
					if _, err := lp.m.Acquire(ctx, "relay", "b", time.Minute); err == nil {
						t.Fatal("b acquired the name while the leader held it")
					}
				}
				time.Sleep(5 * time.Second)
				stopped := time.Now()
				lp.l.stop(syscall.SIGTERM)
				synctest.Wait()
				if !lp.ev.before("stopped 0", "released") {
					t.Fatalf("events %q: want the child stopped, then the release", lp.ev.list())
				}
				if !tc.candidate {
					select {
					case <-lp.errc:
					default:
						t.Fatal("the loop waited after its release though nobody else campaigns")
					}
					if got := time.Since(stopped); got != 0 {
						t.Errorf("the loop returned %v after the stop, want at once", got)
					}
					if first, ok := store.firstSince(stopped); ok {
						t.Errorf("a read %v after the stop; want none", first)
					}
					return
				}
				select {
				case err := <-lp.errc:
					t.Fatalf("the loop returned %v right after its release, before any successor ran", err)
				default:
				}
				if tc.acquires {
					time.Sleep(5 * time.Millisecond)
					rec, err := lp.m.Acquire(ctx, "relay", "b", time.Minute)
					if err != nil {
						t.Fatal(err)
					}
					time.Sleep(successorQuiet)
					synctest.Wait()
					select {
					case err := <-lp.errc:
						t.Fatalf("the loop returned %v once the successor held the name, before its command ran", err)
					default:
					}
					if err := lp.m.Annotate(ctx, "relay", "b", rec.Token, "here"); err != nil {
						t.Fatal(err)
					}
				}
				<-lp.errc
				want := successorWait
				if tc.acquires {
					want = 5*time.Millisecond + successorQuiet
				}
				if got := time.Since(stopped); got != want {
					t.Errorf("the loop returned %v after the stop, want %v", got, want)
				}
				if first, ok := store.firstSince(stopped); !ok || first != successorQuiet {
					t.Errorf("first read %v after the stop (any: %v), want %v", first, ok, successorQuiet)
				}
			})
		})
	}
}

// A leader stopped by a signal whose follower on this host took the name
// at its end signal leaves the store alone for successorQuiet after the
// end signal, about the new command's start (on etcd, its reads during the
// start slowed the hand-off), and reads no candidates before it waits for the
// successor's command: the follower that took the name campaigned.
func TestLoopHandedOverAtTheEndSignalLeavesTheStartAlone(t *testing.T) {
	defer func(f func() (*samehost.EndSignal, error)) { newEndSignal = f }(newEndSignal)
	var sig *samehost.EndSignal
	newEndSignal = func() (*samehost.EndSignal, error) {
		s, err := samehost.NewEndSignal()
		sig = s
		return s, err
	}
	synctest.Test(t, func(t *testing.T) {
		lp, store := startReadLoop(t)
		lp.next(time.Second)
		if sig == nil {
			t.Fatal("the tenure made no end signal")
		}
		// The follower on this host: it has the end signal open.
		follower, err := os.OpenFile(sig.Mark(samehost.Where{}).EndPath, os.O_RDONLY|syscall.O_NONBLOCK, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer follower.Close()
		time.Sleep(5 * time.Second)
		ctx := context.Background()
		held, err := lp.m.Get(ctx, "relay")
		if err != nil {
			t.Fatal(err)
		}
		store.mu.Lock()
		store.candidates = 0
		store.mu.Unlock()
		stopped := time.Now()
		lp.l.stop(syscall.SIGTERM)
		synctest.Wait()
		// It takes the name at the stopping word, as a follower that
		// claimed it does, and its command runs after successorQuiet.
		rec, err := lp.m.Seize(ctx, "relay", "b", held, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(successorQuiet)
		if err := lp.m.Annotate(ctx, "relay", "b", rec.Token, "here"); err != nil {
			t.Fatal(err)
		}
		if err := <-lp.errc; err == nil {
			t.Fatal("the loop returned nil, want the child's exit")
		}
		if first, ok := store.firstSince(stopped); !ok || first < successorQuiet {
			t.Errorf("first read %v after the stop (any: %v), want none before %v, the new command's start", first, ok, successorQuiet)
		}
		store.mu.Lock()
		defer store.mu.Unlock()
		if store.candidates != 0 {
			t.Errorf("read the candidates %d times after the follower took the name; want none", store.candidates)
		}
	})
}

// stopOnAcquire is a store whose Acquire delivers a stop signal to the
// replica just before it grants the name: the stop comes as the campaign
// wins.
type stopOnAcquire struct {
	loggingStore
	stop func()
}

func (s stopOnAcquire) Acquire(ctx context.Context, name, holder string, ttl time.Duration) (lease.Record, error) {
	s.stop()
	return s.loggingStore.Acquire(ctx, name, holder, ttl)
}

// TestLoopStopAsCampaignWinsStartsNothing: a stop signal that comes as the
// campaign wins the name starts no command; the replica releases the name
// and exits 0. (Seen in CI: a follower stopped together with its leader
// took the name at the leader's stopping word, started its command only to
// stop it, and died of the mirrored SIGTERM.)
func TestLoopStopAsCampaignWinsStartsNothing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lp := startLoop(t, nil, func(lp *loop) {
			lp.l.useStore(stopOnAcquire{loggingStore{Memory: lp.m, ev: lp.ev}, func() { lp.l.stop(syscall.SIGTERM) }})
		})
		var err error
		select {
		case err = <-lp.errc:
		case <-time.After(time.Hour):
			t.Fatal("the loop did not end")
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("loop = %v, want context.Canceled (exit 0)", err)
		}
		if evs := lp.ev.list(); slices.ContainsFunc(evs, func(e string) bool { return strings.HasPrefix(e, "started") }) {
			t.Errorf("events %q: a command started after the stop signal", evs)
		}
		if rec, gerr := lp.m.Get(context.Background(), "relay"); gerr == nil && rec.Held() {
			t.Errorf("record = %+v; want the name released", rec)
		}
	})
}

// lines is a log destination that the loop's goroutines may share.
type lines struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *lines) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestLoopCommandEndedByTheDeliveredStopSignalIsStopped: a command that
// the stop signal's goroutine told to stop (Deliver) may end before the
// loop sees the replica stopping: that end is the stop, said as one ("command
// stopped", the stop signal as the tenure's end), not an exit of its own.
func TestLoopCommandEndedByTheDeliveredStopSignalIsStopped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logged lines
		lp := startLoop(t, nil, func(lp *loop) {
			lp.l.log = slog.New(slog.NewTextHandler(&logged, nil))
		})
		c := lp.next(time.Second)
		time.Sleep(5 * time.Second)
		// As relaySignals does: the stop asked, the command's stop
		// signal delivered and the command ended, then stopping closed.
		lp.l.stopAsked.Store(true)
		c.ev.add("exited %d", c.n)
		c.end(supervise.Status{Signal: syscall.SIGTERM})
		synctest.Wait()
		lp.l.stop(syscall.SIGTERM)
		err := <-lp.errc
		var exit *Exit
		if !errors.As(err, &exit) || exit.Status.Signal != syscall.SIGTERM {
			t.Errorf("loop = %v, want the command killed by SIGTERM", err)
		}
		if strings.Contains(logged.String(), `msg="command exited"`) || !strings.Contains(logged.String(), `why="stop signal SIGTERM"`) {
			t.Errorf("log says the command exited on its own, or not that the stop signal ended the tenure:\n%s", logged.String())
		}
	})
}

// A command that ends on its own in failure — a non-zero status, or a
// signal that leaderrun did not send, such as the kernel's out-of-memory
// killer's SIGKILL — is a warning; a clean exit is not. Every "command
// exited" line was at info before.
func TestLoopWarnsOfACommandThatFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logged lines
		lp := startLoop(t, func(rc *Config) { rc.RestartDelay = 0 }, func(lp *loop) {
			lp.l.log = slog.New(slog.NewTextHandler(&logged, nil))
		})
		for _, st := range []supervise.Status{{Signal: syscall.SIGKILL}, {Code: 3}, {Code: 0}} {
			c := lp.next(time.Minute)
			time.Sleep(2 * quickExit) // not a command that exits at once
			c.ev.add("exited %d", c.n)
			c.end(st)
		}
		lp.next(time.Minute)
		lp.end()
		for _, want := range []string{
			`level=WARN msg="command exited"`,
			`status="killed by SIGKILL"`,
			`status="exit status 3"`,
		} {
			if !strings.Contains(logged.String(), want) {
				t.Errorf("log lacks %q:\n%s", want, logged.String())
			}
		}
		for _, l := range strings.Split(logged.String(), "\n") {
			if strings.Contains(l, `msg="command exited"`) && strings.Contains(l, "exit status 0") && !strings.Contains(l, "level=INFO") {
				t.Errorf("a clean exit logged as %q, want info", l)
			}
			if strings.Contains(l, `msg="command exited"`) && !strings.Contains(l, "exit status 0") && !strings.Contains(l, "level=WARN") {
				t.Errorf("a failure logged as %q, want a warning", l)
			}
		}
	})
}

// Under --once a command that finishes at once (a cron job) is what is
// asked for: no warning that leaderrun restarts it, since it does not.
// The daemonize warning fired under --once before.
func TestLoopOnceDoesNotWarnOfAQuickExit(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logged lines
		lp := startLoop(t, func(rc *Config) { rc.Once = true }, func(lp *loop) {
			lp.l.log = slog.New(slog.NewTextHandler(&logged, nil))
		})
		lp.next(time.Minute).exit(0)
		select {
		case <-lp.errc:
		case <-time.After(time.Hour):
			t.Fatal("--once did not end after its command exited")
		}
		if strings.Contains(logged.String(), "level=WARN") {
			t.Errorf("--once warned of a command that exited at once:\n%s", logged.String())
		}
		if !strings.Contains(logged.String(), `level=INFO msg="command exited"`) {
			t.Errorf("no command exited line at info:\n%s", logged.String())
		}
	})
}

// A command that runs a little over the "at once" threshold and ends
// cleanly is restarted without back-off, for ever: that loop was said only
// at info level. Now five ends within a minute are said at warning level,
// and said again a minute later while the loop lasts.
func TestLoopSaysARestartLoopEveryMinute(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var logged bytes.Buffer
		lp := startLoop(t, nil, func(lp *loop) {
			lp.l.log = slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn}))
		})
		c := lp.next(time.Second)
		for range 30 { // about two minutes: 1.5 s each, then the 1 s restart delay
			time.Sleep(1500 * time.Millisecond)
			c.exit(0)
			c = lp.next(time.Minute)
		}
		lp.end()
		if got, want := strings.Count(logged.String(), "command keeps ending and being restarted"), 2; got != want {
			t.Errorf("a restart loop of two minutes said %d times at warning level, want %d:\n%s", got, want, logged.String())
		}
	})
}

// eventHooks logs the replica's Hooks into the event log.
type eventHooks struct{ ev *events }

func (h eventHooks) Started() { h.ev.add("hook started") }
func (h eventHooks) Ended()   { h.ev.add("hook ended") }

// TestLoopHooksAroundTheCommand: Hooks hears that the command runs once it
// started, and that it ended once it is dead and before the name is
// released (the leader label is removed before a successor can be
// elected); a command that did not start is neither.
func TestLoopHooksAroundTheCommand(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lp := startLoop(t, nil, func(l *loop) { l.l.cfg.Hooks = eventHooks{l.ev} })
		c := lp.next(time.Second)
		synctest.Wait() // the start published (the fake's start hands the child over first)
		c.exit(1)
		lp.next(10 * time.Second)
		want := []string{"started 0", "hook started", "exited 0", "stopped 0", "hook ended", "released", "started 1"}
		for i := 1; i < len(want); i++ {
			if !lp.ev.before(want[i-1], want[i]) {
				t.Errorf("events %q: want %q before %q", lp.ev.list(), want[i-1], want[i])
			}
		}
		lp.end()
		if n := strings.Count(strings.Join(lp.ev.list(), "\n"), "hook ended"); n != 2 {
			t.Errorf("events %q: want the end heard twice (the exit, the stop), heard %d", lp.ev.list(), n)
		}
	})
	synctest.Test(t, func(t *testing.T) {
		lp := startLoop(t, func(rc *Config) { rc.Once = true }, func(l *loop) {
			l.l.cfg.Hooks = eventHooks{l.ev}
			l.st.fail = errors.New("no such file")
		})
		if err := <-lp.errc; err == nil {
			t.Fatal("loop with a command that did not start ended without an error")
		}
		for _, ev := range lp.ev.list() {
			if strings.HasPrefix(ev, "hook") {
				t.Errorf("events %q: a command that did not start was heard of", lp.ev.list())
			}
		}
	})
}

// TestLoopCommandResumesOnlyWhileTheTenureHolds: the command's tree, frozen
// while leaderrun was stopped, may run again (Spec.Resumable) while the
// tenure holds, and not once leaderrun wakes past the renew deadline,
// before the tenure's own goroutine has noticed.
func TestLoopCommandResumesOnlyWhileTheTenureHolds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var jump atomic.Int64
		resumable := make(chan func() bool, 1)
		lp := startLoop(t, nil, func(lp *loop) {
			lp.l.elector.Clock = func() time.Duration { return time.Since(lp.start) + time.Duration(jump.Load()) }
			start := lp.l.start
			lp.l.start = func(spec supervise.Spec) (child, error) {
				resumable <- spec.Resumable
				return start(spec)
			}
		})
		lp.next(time.Second)
		may := <-resumable
		if may == nil {
			t.Fatal("the command's Spec has no Resumable: a frozen tree would thaw whatever became of the tenure")
		}
		time.Sleep(10 * time.Second) // renewed meanwhile
		if !may() {
			t.Errorf("Resumable = false while the tenure holds")
		}
		jump.Store(int64(time.Hour)) // leaderrun was stopped for an hour
		if may() {
			t.Errorf("Resumable = true an hour past the renew deadline")
		}
		lp.end()
	})
}

// TestLoopCommandKilledAtAWakeUpPastTheDeadlineEndsTheTenure: continued past
// the renew deadline, leaderrun kills the command's frozen tree
// (supervise.Suspend) before the tenure's own goroutine has read the clock.
// That death is the tenure's end, said as one ("tenure ended", "command
// stopped"), not an exit of the command's own. CI saw "command exited"
// once, in the end-to-end script terminal_stop_self.
func TestLoopCommandKilledAtAWakeUpPastTheDeadlineEndsTheTenure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var jump atomic.Int64
		var logged lines
		lp := startLoop(t, nil, func(lp *loop) {
			lp.l.log = slog.New(slog.NewTextHandler(&logged, nil))
			lp.l.elector.Clock = func() time.Duration { return time.Since(lp.start) + time.Duration(jump.Load()) }
		})
		c := lp.next(time.Second)
		time.Sleep(5 * time.Second)
		jump.Store(int64(time.Hour)) // leaderrun was stopped for an hour
		c.ev.add("exited %d", c.n)
		c.end(supervise.Status{Signal: syscall.SIGKILL}) // as the wake-up's kill
		lp.next(time.Minute)
		lp.end()
		if strings.Contains(logged.String(), `msg="command exited"`) ||
			!strings.Contains(logged.String(), `msg="tenure ended; stopping command"`) ||
			!strings.Contains(logged.String(), `msg="command stopped"`) {
			t.Errorf("log says the command exited on its own, or not that the tenure ended:\n%s", logged.String())
		}
	})
}

// A tenure that can make no end signal (a runtime directory others may
// write, say) leaves same-host followers to learn of a graceful hand-over
// through the store, more slowly: that was said at debug level alone.
// Now the first tenure says it at warning level, the next ones at debug.
func TestLoopSaysOnceThatThereIsNoEndSignal(t *testing.T) {
	defer func(f func() (*samehost.EndSignal, error)) { newEndSignal = f }(newEndSignal)
	newEndSignal = func() (*samehost.EndSignal, error) {
		return nil, errors.New("the end signals' directory /run/leaderrun may be used by others (mode 0777, want 0700)")
	}
	synctest.Test(t, func(t *testing.T) {
		var logged bytes.Buffer
		lp := startLoop(t, nil, func(lp *loop) {
			lp.l.log = slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn}))
		})
		c := lp.next(time.Second)
		for range 3 { // three tenures
			time.Sleep(5 * time.Second)
			c.exit(0)
			c = lp.next(time.Minute)
		}
		lp.end()
		if got := strings.Count(logged.String(), "no end signal for followers on this host"); got != 1 {
			t.Errorf("said %d times at warning level over four tenures, want once:\n%s", got, logged.String())
		}
	})
}
