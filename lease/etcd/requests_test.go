package etcd

import (
	"bufio"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/etcdtest"
	"github.com/leaderrun/leaderrun/lease"
)

// requests returns, by gRPC method, the messages every member of c has
// received from clients so far (grpc_server_msg_received_total: one per
// unary call, one per message on a stream), as the benchmark counts them.
// The package's tests run one at a time, so a difference of two counts is
// what the test in between sent.
func requests(t *testing.T, c *etcdtest.Cluster) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, ep := range c.Endpoints() {
		resp, err := http.Get("http://" + ep + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, "grpc_server_msg_received_total{") {
				continue
			}
			_, rest, _ := strings.Cut(line, `grpc_method="`)
			method, _, _ := strings.Cut(rest, `"`)
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				t.Fatalf("metrics line %q: %v", line, err)
			}
			out[method] += v
		}
		resp.Body.Close()
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// sent is the requests of each method in after that were not in before.
func sent(before, after map[string]float64) map[string]int {
	out := map[string]int{}
	for m, v := range after {
		if d := int(v - before[m]); d != 0 {
			out[m] = d
		}
	}
	return out
}

// TestHandOffIsOneTransaction checks that a follower woken by a release
// takes the name with one transaction, on what its Wait's watch told it,
// and keeps its spare lease alive alongside: no read first, no new lease.
func TestHandOffIsOneTransaction(t *testing.T) {
	c, prefix := newPrefix(t)
	dsn := dsnFor(prefix, c.Endpoints()...)
	leader, follower := openStore(t, dsn), openStore(t, dsn)
	waiting := make(chan struct{}, 1)
	follower.waiting = func() { waiting <- struct{}{} }
	rec, err := leader.Acquire(testCtx(t), "n", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	_, err = follower.Acquire(testCtx(t), "n", "b", time.Minute)
	var held *lease.HeldError
	if !errors.As(err, &held) {
		t.Fatalf("follower's Acquire = %v, want *lease.HeldError", err)
	}
	woke := make(chan error, 1)
	go func() { woke <- follower.Wait(testCtx(t), "n", held.Record, time.Minute) }()
	select {
	case <-waiting:
	case <-time.After(10 * time.Second):
		t.Fatal("the follower did not wait")
	}
	if err := leader.Release(testCtx(t), "n", "a", rec.Token); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-woke:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the release did not wake the follower")
	}
	before := requests(t, c)
	got, err := follower.Acquire(testCtx(t), "n", "b", time.Minute)
	if err != nil {
		t.Fatalf("Acquire after the release: %v", err)
	}
	reqs := sent(before, requests(t, c))
	if got.Holder != "b" || got.Token <= rec.Token {
		t.Errorf("Acquire = holder %q token %d, want b with a token above %d", got.Holder, got.Token, rec.Token)
	}
	if reqs["Txn"] != 1 || reqs["Range"] != 0 || reqs["LeaseGrant"] != 0 || reqs["LeaseKeepAlive"] != 1 {
		t.Errorf("Acquire after the wake-up sent %v, want one Txn and one LeaseKeepAlive (of the spare lease)", reqs)
	}
}
