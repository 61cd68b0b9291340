package replica

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	"github.com/leaderrun/leaderrun/config"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
	"github.com/leaderrun/leaderrun/supervise"
)

// The partitioned mode's tests run a whole replica (its Owner included) in
// a synctest bubble against the in-memory store, opened through a DSN
// scheme of the tests' own, with fake commands that log into the same
// event log as the store's releases.

// testStores maps a "cmdtest:" DSN to what opens its store.
var (
	testStores       sync.Map // string → func() lease.Store
	registerTestOnce sync.Once
)

// testDSN returns a DSN that opens open's store.
func testDSN(t *testing.T, open func() lease.Store) string {
	registerTestOnce.Do(func() {
		lease.Register("cmdtest", func(_ context.Context, dsn string, _ lease.OpenOptions) (lease.Store, error) {
			v, ok := testStores.Load(dsn)
			if !ok {
				return nil, lease.ErrRefused
			}
			return v.(func() lease.Store)(), nil
		})
	})
	dsn := "cmdtest:" + t.Name()
	testStores.Store(dsn, open)
	t.Cleanup(func() { testStores.Delete(dsn) })
	return dsn
}

// namedReleases logs every release, with the name released, into the
// event log.
type namedReleases struct {
	*leasetest.Memory
	ev *events
}

func (s namedReleases) Release(ctx context.Context, name, holder string, token int64) error {
	err := s.Memory.Release(ctx, name, holder, token)
	s.ev.add("released %s err=%v", name, err)
	return err
}

// slowChild is a partition's command that takes a second to exit on its
// stop signal, as a command that finishes its work first does.
type slowChild struct {
	p     int
	token int64 // its LEADERRUN_TOKEN
	ev    *events
	done  chan struct{}
	once  sync.Once
}

func (c *slowChild) Pid() int                    { return 2000 + c.p }
func (c *slowChild) Done() <-chan struct{}       { return c.done }
func (c *slowChild) Signal(syscall.Signal) error { return nil }
func (c *slowChild) Stop() supervise.Status      { return c.StopWith(syscall.SIGTERM) }
func (c *slowChild) Deliver(syscall.Signal)      {}

// exit makes the command exit on its own, with status 1.
func (c *slowChild) exit() {
	c.ev.add("exited %s", lease.PartitionKey("ingest", c.p))
	c.once.Do(func() { close(c.done) })
}

func (c *slowChild) StopWith(sig syscall.Signal) supervise.Status {
	time.Sleep(time.Second)
	c.once.Do(func() { close(c.done) })
	c.ev.add("stopped %s", lease.PartitionKey("ingest", c.p))
	return supervise.Status{Signal: sig}
}

// TestPartitionHandOffStopsCommandBeforeRelease: at most one command per
// partition runs at a time. A replica that hands partitions off to a
// member that joined releases each only once its command has exited, so
// that the successor cannot start its own while the old one still runs.
func TestPartitionHandOffStopsCommandBeforeRelease(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const n = 4
		rp := startPartitioned(t, n)
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if got := count(rp.ev.list(), "started "); got != n {
			t.Fatalf("alone, replica a started %d commands, want %d; events %q", got, n, rp.ev.list())
		}

		// b joins: a hands it its share.
		if _, err := rp.m.Join(context.Background(), "ingest", n, "b", time.Hour); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Second)
		synctest.Wait()
		if got := count(rp.ev.list(), "released "); got == 0 {
			t.Fatalf("replica a handed nothing off to b; events %q", rp.ev.list())
		}
		wantStoppedBeforeReleased(t, rp.ev)

		rp.end()
		wantStoppedBeforeReleased(t, rp.ev)
	})
}

// TestPartitionRestartGetsANewerToken: fencing tokens strictly increase
// per partition. A partition's command that exits on its own is started
// again only under a new tenure, whose token is above the last one's, so
// that what it writes can fence out what the old command wrote.
func TestPartitionRestartGetsANewerToken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rp := startPartitioned(t, 1)
		first := rp.next()
		first.exit()
		second := rp.next()
		if second.token <= first.token {
			t.Errorf("partition 0's command started again with token %d, want above its previous %d; events %q",
				second.token, first.token, rp.ev.list())
		}
		rp.end()
	})
}

// partitionedReplica is a partitioned replica "a" of group "ingest" under
// test.
type partitionedReplica struct {
	t       *testing.T
	pr      *partitioned
	m       *leasetest.Memory
	ev      *events
	started chan *slowChild
	errc    chan error
}

// startPartitioned runs replica "a" of group "ingest" of n partitions,
// after calling each of before.
func startPartitioned(t *testing.T, n int, before ...func(*partitionedReplica)) *partitionedReplica {
	rp := &partitionedReplica{t: t, m: &leasetest.Memory{}, ev: &events{},
		started: make(chan *slowChild, n), errc: make(chan error, 1)}
	rc := Config{Config: config.Config{Name: "ingest", Partitions: n, Timing: testTiming(),
		RestartDelay: time.Second, Command: []string{"cmd"}}, StopSignal: syscall.SIGTERM}
	rp.pr = newPartitioned(newReplica(rc, "a", slog.New(slog.DiscardHandler)))
	rp.pr.dsn = testDSN(t, func() lease.Store { return namedReleases{Memory: rp.m.Handle(), ev: rp.ev} })
	rp.pr.start = func(spec supervise.Spec) (child, error) {
		p, err := strconv.Atoi(envValue(spec.Env, "LEADERRUN_PARTITION"))
		if err != nil {
			t.Errorf("command started without LEADERRUN_PARTITION: %v", err)
		}
		token, err := strconv.ParseInt(envValue(spec.Env, "LEADERRUN_TOKEN"), 10, 64)
		if err != nil {
			t.Errorf("command started without LEADERRUN_TOKEN: %v", err)
		}
		rp.ev.add("started %s token=%d", lease.PartitionKey("ingest", p), token)
		c := &slowChild{p: p, token: token, ev: rp.ev, done: make(chan struct{})}
		select {
		case rp.started <- c:
		default: // nobody waits for it
		}
		return c, nil
	}
	start := time.Now()
	rp.pr.clock = func() time.Duration { return time.Since(start) }
	for _, b := range before {
		b(rp)
	}
	go func() { rp.errc <- rp.pr.run() }()
	return rp
}

// next returns the next command started, failing after a minute.
func (rp *partitionedReplica) next() *slowChild {
	rp.t.Helper()
	select {
	case c := <-rp.started:
		return c
	case <-time.After(time.Minute):
		rp.t.Fatalf("no command started within a minute; events %q", rp.ev.list())
		return nil
	}
}

// end stops the replica and waits for its run to return.
func (rp *partitionedReplica) end() {
	rp.t.Helper()
	rp.pr.stop(syscall.SIGTERM)
	select {
	case <-rp.errc:
	case <-time.After(time.Hour):
		rp.t.Fatal("the partitioned replica did not end on a stop")
	}
}

// wantStoppedBeforeReleased fails unless every partition released had its
// command stopped first.
func wantStoppedBeforeReleased(t *testing.T, ev *events) {
	t.Helper()
	checked := map[string]bool{}
	for _, e := range ev.list() {
		name, ok := strings.CutPrefix(e, "released ")
		name, _, _ = strings.Cut(name, " err=")
		if !ok || checked[name] {
			continue
		}
		checked[name] = true
		if !ev.before("stopped "+name, "released "+name) {
			t.Errorf("events %q: want %s's command stopped before its release", ev.list(), name)
		}
	}
}

// count returns how many events start with prefix.
func count(events []string, prefix string) int {
	n := 0
	for _, e := range events {
		if strings.HasPrefix(e, prefix) {
			n++
		}
	}
	return n
}

// signalledChild is a command that records the signals relayed to it.
type signalledChild struct {
	*slowChild
	mu  sync.Mutex
	got []syscall.Signal
}

func (c *signalledChild) Signal(sig syscall.Signal) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.got = append(c.got, sig)
	return nil
}

// A replica that takes many partitions at once (a dead member's share)
// starts their commands in parallel, and a signal relayed while commands
// start waits for them and reaches each. The starts took the replica's
// mutex one after the other before, 10 ms each on a 2-core machine with
// cgroups, which made the benchmark's partitioned SIGKILL failover miss
// its target. (Real time, not a synctest bubble: a goroutine blocked on a
// mutex stops a bubble's clock.)
func TestPartitionCommandsStartInParallel(t *testing.T) {
	const n = 8
	var mu sync.Mutex
	inFlight := 0
	var children []*signalledChild
	entered, release := make(chan struct{}, n), make(chan struct{})
	rp := startPartitioned(t, n, func(rp *partitionedReplica) {
		start := rp.pr.start
		rp.pr.start = func(spec supervise.Spec) (child, error) {
			mu.Lock()
			inFlight++
			mu.Unlock()
			entered <- struct{}{}
			<-release // a slow fork and exec
			c, err := start(spec)
			sc := &signalledChild{slowChild: c.(*slowChild)}
			mu.Lock()
			inFlight--
			children = append(children, sc)
			mu.Unlock()
			return sc, err
		}
	})
	deadline := time.After(30 * time.Second)
	for i := range n {
		select {
		case <-entered:
		case <-deadline:
			close(release)
			t.Fatalf("only %d of %d commands were starting at once after 30s, want all in parallel", i, n)
		}
	}
	// Every start is under way: a signal relayed now waits for them.
	sigs := make(chan os.Signal, 1)
	quit := make(chan struct{})
	defer close(quit)
	go rp.pr.relaySignals(sigs, quit)
	sigs <- syscall.SIGUSR1
	close(release)
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		mu.Lock()
		reached := 0
		for _, c := range children {
			c.mu.Lock()
			if slices.Contains(c.got, syscall.SIGUSR1) {
				reached++
			}
			c.mu.Unlock()
		}
		mu.Unlock()
		if reached == n {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the SIGUSR1 relayed while %d commands started reached %d of them within 30s", n, reached)
		}
	}
	rp.end()
}
