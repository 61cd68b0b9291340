package observe

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/lease"
)

const renewDeadline = 8 * time.Second

// fakeClock is a settable clock for Observer.now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newTest(t *testing.T) (*Observer, *fakeClock) {
	t.Helper()
	clk := &fakeClock{t: time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)}
	return newObserver("jobs", "host-a:1", renewDeadline, clk.Now), clk
}

var errDown = errors.New("dial tcp 10.0.0.1:5432: connection refused")

func held() error {
	return fmt.Errorf("acquire: %w", &lease.HeldError{Record: lease.Record{Name: "jobs", Holder: "host-b:2", Token: 7, Remaining: 12 * time.Second}})
}

// get serves one request to h and returns the status, Content-Type and body.
func get(t *testing.T, h http.Handler, path string) (int, string, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec.Code, rec.Header().Get("Content-Type"), rec.Body.String()
}

func checkLeader(t *testing.T, o *Observer, wantCode int, want leaderState) {
	t.Helper()
	code, ctype, body := get(t, o.Handler(), "/leader")
	if code != wantCode {
		t.Errorf("GET /leader status = %d, want %d", code, wantCode)
	}
	if got, want := ctype, "application/json"; got != want {
		t.Errorf("GET /leader Content-Type = %q, want %q", got, want)
	}
	// Decode into a map as well, so a renamed JSON field fails the test.
	var fields map[string]any
	if err := json.Unmarshal([]byte(body), &fields); err != nil {
		t.Fatalf("GET /leader body %q: %v", body, err)
	}
	wantFields := map[string]any{"name": want.Name, "holder": want.Holder, "leading": want.Leading,
		"token": float64(want.Token), "self": want.Self}
	if got, want := fmt.Sprint(fields), fmt.Sprint(wantFields); got != want {
		t.Errorf("GET /leader body = %s, want %s", got, want)
	}
}

func checkHealthz(t *testing.T, o *Observer, wantCode int, wantBody string) {
	t.Helper()
	code, _, body := get(t, o.Handler(), "/healthz")
	if code != wantCode || body != wantBody {
		t.Errorf("GET /healthz = %d %q, want %d %q", code, body, wantCode, wantBody)
	}
	if got, want := o.Healthy(), wantCode == http.StatusOK; got != want {
		t.Errorf("Healthy() = %v, want %v", got, want)
	}
}

func TestLeaderTransitions(t *testing.T) {
	o, clk := newTest(t)
	// On standby, /leader names the leader the store named, not this
	// replica; before anything is known, nobody.
	checkLeader(t, o, http.StatusServiceUnavailable, leaderState{Name: "jobs", Self: "host-a:1"})
	o.StoreCall("acquire", 3*time.Millisecond, held())
	checkLeader(t, o, http.StatusServiceUnavailable, leaderState{Name: "jobs", Holder: "host-b:2", Token: 7, Self: "host-a:1"})

	o.StoreCall("acquire", 3*time.Millisecond, nil)
	o.Elected(42)
	if !o.Leading() {
		t.Error("Leading() = false after Elected")
	}
	leading := func(token int64) leaderState {
		return leaderState{Name: "jobs", Holder: "host-a:1", Leading: true, Token: token, Self: "host-a:1"}
	}
	checkLeader(t, o, http.StatusOK, leading(42))

	for range 3 {
		clk.Advance(2 * time.Second)
		o.StoreCall("renew", 4*time.Millisecond, nil)
		checkLeader(t, o, http.StatusOK, leading(42))
	}

	o.StoreCall("renew", 4*time.Millisecond, lease.ErrLost)
	o.Ended(lease.ErrLost)
	if o.Leading() {
		t.Error("Leading() = true after Ended")
	}
	checkLeader(t, o, http.StatusServiceUnavailable, leaderState{Name: "jobs", Self: "host-a:1"})

	o.Elected(43)
	checkLeader(t, o, http.StatusOK, leading(43))
}

func TestHealthzGraceAfterNew(t *testing.T) {
	o, clk := newTest(t)
	checkHealthz(t, o, http.StatusOK, "ok\n")
	clk.Advance(renewDeadline - time.Millisecond)
	checkHealthz(t, o, http.StatusOK, "ok\n")
	clk.Advance(time.Millisecond)
	checkHealthz(t, o, http.StatusServiceUnavailable, "store not reached in the 8s since start (renew deadline 8s)\n")

	// Failures before the first answer keep the clock running from New.
	clk.Advance(1200 * time.Millisecond)
	o.StoreCall("acquire", 2*time.Second, errDown)
	checkHealthz(t, o, http.StatusServiceUnavailable, "store not reached for 9.2s (renew deadline 8s); last acquire failed\n")

	o.StoreCall("acquire", time.Millisecond, held())
	checkHealthz(t, o, http.StatusOK, "ok\n")
}

func TestHealthzFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer error
	}{
		{"ok", nil},
		{"held", held()},
		{"lost", fmt.Errorf("renew lease %q: %w", "jobs", lease.ErrLost)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o, clk := newTest(t)
			o.StoreCall("acquire", time.Millisecond, tc.answer)

			// A standby may go quiet for longer than the renew deadline.
			clk.Advance(3 * renewDeadline)
			checkHealthz(t, o, http.StatusOK, "ok\n")

			// A failure starts the clock when the failed call was sent.
			o.StoreCall("renew", 2*time.Second, errDown)
			checkHealthz(t, o, http.StatusOK, "ok\n")
			clk.Advance(renewDeadline - 2*time.Second - time.Millisecond)
			o.StoreCall("renew", time.Second, context.DeadlineExceeded)
			checkHealthz(t, o, http.StatusOK, "ok\n")
			clk.Advance(time.Millisecond)
			checkHealthz(t, o, http.StatusServiceUnavailable, "store not reached for 8s (renew deadline 8s); last renew failed\n")
			clk.Advance(1200 * time.Millisecond)
			o.StoreCall("release", time.Second, errDown)
			checkHealthz(t, o, http.StatusServiceUnavailable, "store not reached for 9.2s (renew deadline 8s); last release failed\n")

			o.StoreCall("renew", time.Millisecond, tc.answer)
			checkHealthz(t, o, http.StatusOK, "ok\n")
		})
	}
}

func TestNew(t *testing.T) {
	o := New("jobs", "host-a:1", renewDeadline)
	if !o.Healthy() {
		t.Error("Healthy() = false right after New")
	}
	if o.Leading() {
		t.Error("Leading() = true right after New")
	}
	// The registry carries the Go and process collectors too.
	code, _, body := get(t, o.Handler(), "/metrics")
	if code != http.StatusOK {
		t.Fatalf("GET /metrics status = %d, want 200", code)
	}
	for _, name := range []string{"go_goroutines", "process_cpu_seconds_total", `leaderrun_leading{name="jobs"} 0`} {
		if !strings.Contains(body, name) {
			t.Errorf("GET /metrics lacks %s", name)
		}
	}
}

func TestMethodNotAllowed(t *testing.T) {
	o, _ := newTest(t)
	rec := httptest.NewRecorder()
	o.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/leader", nil))
	if got, want := rec.Code, http.StatusMethodNotAllowed; got != want {
		t.Errorf("POST /leader status = %d, want %d", got, want)
	}
}

// metricHeaders are the HELP and TYPE lines of the metrics the package doc
// promises.
var metricHeaders = map[string]string{
	"leaderrun_child_exits_total":           "Command exits by exit code (128+N for signal N).\ncounter",
	"leaderrun_health_checks_total":         "Health checks of the command run to their end (--health-cmd).\ncounter",
	"leaderrun_health_check_failures_total": "Health checks that failed: a non-zero exit, a timeout, or a check that could not start.\ncounter",
	"leaderrun_health_handovers_total":      "Hand-overs of the name to another replica because the command was unhealthy.\ncounter",
	"leaderrun_health_restarts_total":       "Restarts of an unhealthy command because no other replica was live and eligible.\ncounter",
	"leaderrun_leading":                     "1 while this process holds the lease, else 0.\ngauge",
	"leaderrun_renew_duration_seconds":      "Round-trip time of renew calls, whatever their outcome.\nhistogram",
	"leaderrun_seconds_since_last_renew":    "While leading, seconds since the last successful renew (or since the tenure started); after a tenure that ended with the store unreachable, still counting until the store answers; else 0 on standby.\ngauge",
	"leaderrun_store_calls_total":           "Store calls by operation and result (ok, held, lost, error).\ncounter",
	"leaderrun_tenure_ends_total":           "Tenures ended, by cause (lost, deadline, released, stepdown, other).\ncounter",
	"leaderrun_tenures_total":               "Tenures started by this process.\ncounter",
	"leaderrun_token":                       "Fencing token of the current tenure; 0 on standby.\ngauge",
}

// storeCalls renders leaderrun_store_calls_total with the given non-zero
// counts, keyed "op/result".
func storeCalls(counts map[string]int) string {
	var b strings.Builder
	for _, op := range []string{"acquire", "release", "renew"} {
		for _, r := range []string{"error", "held", "lost", "ok"} {
			fmt.Fprintf(&b, "leaderrun_store_calls_total{name=\"jobs\",op=%q,result=%q} %d\n", op, r, counts[op+"/"+r])
		}
	}
	return b.String()
}

// scrape compares the metrics that want mentions, as GET /metrics on a
// live server returns them, with want (samples only; scrape adds HELP and
// TYPE).
func scrape(t *testing.T, srv *httptest.Server, want string) {
	t.Helper()
	var names []string
	var text strings.Builder
	for name, header := range metricHeaders {
		if !strings.Contains(want, name+"{") && !strings.Contains(want, name+"_bucket{") {
			continue
		}
		help, typ, _ := strings.Cut(header, "\n")
		fmt.Fprintf(&text, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, typ)
		names = append(names, name)
	}
	text.WriteString(want)
	if err := testutil.ScrapeAndCompare(srv.URL+"/metrics", strings.NewReader(text.String()), names...); err != nil {
		t.Error(err)
	}
}

// TestMetricsDocumented checks that the registry exports exactly the
// documented leaderrun_ metrics, each with the name label.
func TestMetricsDocumented(t *testing.T) {
	o, _ := newTest(t)
	o.ChildExited(0) // a vector without samples is not gathered
	mfs, err := o.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, mf := range mfs {
		name := mf.GetName()
		if !strings.HasPrefix(name, "leaderrun_") {
			continue
		}
		seen[name] = true
		if _, ok := metricHeaders[name]; !ok {
			t.Errorf("undocumented metric %s", name)
		}
		for _, m := range mf.GetMetric() {
			found := false
			for _, lp := range m.GetLabel() {
				found = found || lp.GetName() == "name" && lp.GetValue() == "jobs"
			}
			if !found {
				t.Errorf("%s sample %v lacks name=\"jobs\"", name, m.GetLabel())
			}
		}
	}
	for name := range metricHeaders {
		if !seen[name] {
			t.Errorf("documented metric %s not exported", name)
		}
	}
}

func TestMetricsTransitions(t *testing.T) {
	o, clk := newTest(t)
	srv := httptest.NewServer(o.Handler())
	defer srv.Close()

	// Standby: the name is held by someone else.
	o.StoreCall("acquire", 2*time.Millisecond, held())
	scrape(t, srv, `
leaderrun_leading{name="jobs"} 0
leaderrun_token{name="jobs"} 0
leaderrun_tenures_total{name="jobs"} 0
leaderrun_seconds_since_last_renew{name="jobs"} 0
leaderrun_tenure_ends_total{cause="deadline",name="jobs"} 0
leaderrun_tenure_ends_total{cause="lost",name="jobs"} 0
leaderrun_tenure_ends_total{cause="other",name="jobs"} 0
leaderrun_tenure_ends_total{cause="released",name="jobs"} 0
leaderrun_tenure_ends_total{cause="stepdown",name="jobs"} 0
leaderrun_renew_duration_seconds_bucket{name="jobs",le="0.001"} 0
leaderrun_renew_duration_seconds_bucket{name="jobs",le="0.0025"} 0
leaderrun_renew_duration_seconds_bucket{name="jobs",le="0.005"} 0
leaderrun_renew_duration_seconds_bucket{name="jobs",le="0.01"} 0
leaderrun_renew_duration_seconds_bucket{name="jobs",le="0.025"} 0
leaderrun_renew_duration_seconds_bucket{name="jobs",le="0.05"} 0
leaderrun_renew_duration_seconds_bucket{name="jobs",le="0.1"} 0
leaderrun_renew_duration_seconds_bucket{name="jobs",le="0.25"} 0
leaderrun_renew_duration_seconds_bucket{name="jobs",le="0.5"} 0
leaderrun_renew_duration_seconds_bucket{name="jobs",le="1"} 0
leaderrun_renew_duration_seconds_bucket{name="jobs",le="2"} 0
leaderrun_renew_duration_seconds_bucket{name="jobs",le="+Inf"} 0
leaderrun_renew_duration_seconds_sum{name="jobs"} 0
leaderrun_renew_duration_seconds_count{name="jobs"} 0
`+storeCalls(map[string]int{"acquire/held": 1}))

	// Elected, then renewals: two quick, one slow, one failed.
	o.StoreCall("acquire", 2*time.Millisecond, nil)
	o.Elected(1736000000123)
	clk.Advance(500 * time.Millisecond)
	scrape(t, srv, `
leaderrun_leading{name="jobs"} 1
leaderrun_token{name="jobs"} 1.736000000123e+12
leaderrun_tenures_total{name="jobs"} 1
leaderrun_seconds_since_last_renew{name="jobs"} 0.5
`)
	for _, took := range []time.Duration{4 * time.Millisecond, 8 * time.Millisecond, 1500 * time.Millisecond} {
		clk.Advance(2 * time.Second)
		o.StoreCall("renew", took, nil)
	}
	clk.Advance(2 * time.Second)
	o.StoreCall("renew", 2*time.Second, errDown)
	clk.Advance(250 * time.Millisecond)
	scrape(t, srv, `
leaderrun_leading{name="jobs"} 1
leaderrun_seconds_since_last_renew{name="jobs"} 2.25
leaderrun_renew_duration_seconds_bucket{name="jobs",le="0.001"} 0
leaderrun_renew_duration_seconds_bucket{name="jobs",le="0.0025"} 0
leaderrun_renew_duration_seconds_bucket{name="jobs",le="0.005"} 1
leaderrun_renew_duration_seconds_bucket{name="jobs",le="0.01"} 2
leaderrun_renew_duration_seconds_bucket{name="jobs",le="0.025"} 2
leaderrun_renew_duration_seconds_bucket{name="jobs",le="0.05"} 2
leaderrun_renew_duration_seconds_bucket{name="jobs",le="0.1"} 2
leaderrun_renew_duration_seconds_bucket{name="jobs",le="0.25"} 2
leaderrun_renew_duration_seconds_bucket{name="jobs",le="0.5"} 2
leaderrun_renew_duration_seconds_bucket{name="jobs",le="1"} 2
leaderrun_renew_duration_seconds_bucket{name="jobs",le="2"} 4
leaderrun_renew_duration_seconds_bucket{name="jobs",le="+Inf"} 4
leaderrun_renew_duration_seconds_sum{name="jobs"} 3.512
leaderrun_renew_duration_seconds_count{name="jobs"} 4
`+storeCalls(map[string]int{"acquire/held": 1, "acquire/ok": 1, "renew/ok": 3, "renew/error": 1}))

	// The tenure is lost; the child is stopped with SIGTERM; the name is
	// released too late.
	o.StoreCall("renew", 3*time.Millisecond, lease.ErrLost)
	o.Ended(lease.ErrLost)
	o.Ended(lease.ErrLost) // a second call changes nothing
	o.ChildExited(128 + int(syscall.SIGTERM))
	o.StoreCall("release", time.Millisecond, fmt.Errorf("release lease %q: %w", "jobs", lease.ErrLost))
	scrape(t, srv, `
leaderrun_leading{name="jobs"} 0
leaderrun_token{name="jobs"} 0
leaderrun_tenures_total{name="jobs"} 1
leaderrun_seconds_since_last_renew{name="jobs"} 0
leaderrun_tenure_ends_total{cause="deadline",name="jobs"} 0
leaderrun_tenure_ends_total{cause="lost",name="jobs"} 1
leaderrun_tenure_ends_total{cause="other",name="jobs"} 0
leaderrun_tenure_ends_total{cause="released",name="jobs"} 0
leaderrun_tenure_ends_total{cause="stepdown",name="jobs"} 0
leaderrun_child_exits_total{code="143",name="jobs"} 1
`+storeCalls(map[string]int{"acquire/held": 1, "acquire/ok": 1, "renew/ok": 3, "renew/error": 1, "renew/lost": 1, "release/lost": 1}))
}

func TestTenureEndCauses(t *testing.T) {
	o, _ := newTest(t)
	causes := []error{
		elect.ErrDeadline,
		fmt.Errorf("tenure: %w", elect.ErrDeadline),
		elect.ErrReleased,
		lease.ErrLost,
		context.Canceled,
		nil,
	}
	for i, cause := range causes {
		o.Elected(int64(i + 1))
		o.Ended(cause)
	}
	o.ChildExited(0)
	o.ChildExited(0)
	o.ChildExited(1)
	for _, tc := range []struct {
		cause string
		want  float64
	}{{"deadline", 2}, {"released", 1}, {"lost", 1}, {"other", 2}} {
		if got := testutil.ToFloat64(o.tenureEnds.WithLabelValues(tc.cause)); got != tc.want {
			t.Errorf("leaderrun_tenure_ends_total{cause=%q} = %v, want %v", tc.cause, got, tc.want)
		}
	}
	if got, want := testutil.ToFloat64(o.tenures), float64(len(causes)); got != want {
		t.Errorf("leaderrun_tenures_total = %v, want %v", got, want)
	}
	for code, want := range map[string]float64{"0": 2, "1": 1} {
		if got := testutil.ToFloat64(o.childExits.WithLabelValues(code)); got != want {
			t.Errorf("leaderrun_child_exits_total{code=%q} = %v, want %v", code, got, want)
		}
	}
}

func TestConcurrentUse(t *testing.T) {
	o := New("jobs", "host-a:1", renewDeadline)
	h := o.Handler()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 50 {
				o.StoreCall("renew", time.Millisecond, nil)
				o.Elected(int64(i*100 + j))
				get(t, h, "/leader")
				get(t, h, "/metrics")
				o.Ended(elect.ErrReleased)
				o.Healthy()
			}
		})
	}
	wg.Wait()
	if o.Leading() {
		t.Error("Leading() = true after every tenure ended")
	}
}

func TestListenAddressInUse(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	addr := busy.Addr().String()

	l, err := Listen(addr)
	if err == nil {
		l.Close()
		t.Fatalf("Listen(%q) on a busy port succeeded", addr)
	}
	if got, want := err.Error(), "--http-addr "+addr+": address already in use"; got != want {
		t.Errorf("Listen error = %q, want %q", got, want)
	}
	if !errors.Is(err, syscall.EADDRINUSE) {
		t.Errorf("Listen error %v is not EADDRINUSE", err)
	}
}

func TestListenBadAddress(t *testing.T) {
	_, err := Listen("127.0.0.1:http-ish")
	if err == nil || !strings.HasPrefix(err.Error(), "--http-addr 127.0.0.1:http-ish: ") {
		t.Errorf("Listen error = %v, want one naming the address", err)
	}
}

func TestServe(t *testing.T) {
	o := New("jobs", "host-a:1", renewDeadline)
	o.Elected(9)
	l, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + l.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	served := make(chan error, 1)
	go func() { served <- o.Serve(ctx, l) }()

	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url + "/leader")
	if err != nil {
		t.Fatalf("GET /leader: %v", err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if got, want := resp.StatusCode, http.StatusOK; got != want {
		t.Errorf("GET /leader status = %d, want %d", got, want)
	}
	if got, want := string(body), `{"name":"jobs","holder":"host-a:1","token":9,"leading":true,"self":"host-a:1"}`+"\n"; got != want {
		t.Errorf("GET /leader body = %s, want %s", got, want)
	}

	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve after ctx ended = %v, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return after ctx ended")
	}
	client.CloseIdleConnections()
	if _, err := client.Get(url + "/healthz"); err == nil {
		t.Error("GET /healthz after Serve returned succeeded; want the listener closed")
	}
}

func TestServeListenerFails(t *testing.T) {
	o := New("jobs", "host-a:1", renewDeadline)
	l, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	served := make(chan error, 1)
	go func() { served <- o.Serve(context.Background(), l) }()
	select {
	case err := <-served:
		if err == nil {
			t.Error("Serve on a closed listener = nil, want an error")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Serve on a closed listener did not return")
	}
}

func Example() {
	obs := New("jobs", "host-a:1", 8*time.Second)
	elector := &elect.Elector{Name: "jobs", Holder: "host-a:1", Observe: obs.StoreCall /* , Store, timings… */}
	_ = elector

	l, err := Listen("127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- obs.Serve(ctx, l) }()

	obs.Elected(42)
	resp, err := http.Get("http://" + l.Addr().String() + "/leader")
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Print(resp.Status, " ", string(body))

	cancel()
	select {
	case err := <-done:
		fmt.Println(err)
	case <-time.After(5 * time.Second):
		fmt.Println("Serve did not return")
	}
	// Output:
	// 200 OK {"name":"jobs","holder":"host-a:1","token":42,"leading":true,"self":"host-a:1"}
	// <nil>
}

// TestConnectionsAreCapped: connections beyond the cap wait in the
// kernel's backlog instead of taking file descriptors while every
// connection has a request in flight.
func TestConnectionsAreCapped(t *testing.T) {
	l, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ll := limitListener(l, 2)
	inFlight, release := make(chan struct{}), make(chan struct{})
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			inFlight <- struct{}{}
			<-release
		}
	})
	srv := &http.Server{Handler: slow, ConnState: ll.track}
	go srv.Serve(ll)
	defer srv.Close()
	defer close(release)
	addr := l.Addr().String()

	get := func(path string, timeout time.Duration) error {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(timeout))
		if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path); err != nil {
			return err
		}
		_, err = http.ReadResponse(bufio.NewReader(c), nil)
		return err
	}
	// Two connections with a request in flight.
	for range 2 {
		go get("/slow", time.Minute)
		<-inFlight
	}
	if err := get("/healthz", 300*time.Millisecond); err == nil {
		t.Fatal("a third connection was served while two had requests in flight, with a cap of 2")
	}
}

// TestIdleConnectionsDoNotStarveProbes: clients that connect and idle,
// before or after a request, never keep /healthz from answering: the
// quietest connection is closed to make room.
func TestIdleConnectionsDoNotStarveProbes(t *testing.T) {
	addr := serveTest(t)
	for i := range 200 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if i >= maxConns {
			continue // connected, silent
		}
		// One request on a kept-alive connection, then silence.
		c.SetDeadline(time.Now().Add(30 * time.Second))
		if _, err := fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		resp.Body.Close()
	}
	// Far below the 30 s after which the server would close idle
	// connections on its own.
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get("http://" + addr + "/healthz")
	if err != nil {
		t.Fatalf("/healthz with 200 idle connections open: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/healthz: %s", resp.Status)
	}
}

// serveTest serves a new Observer on a loopback port until the test ends
// and returns its address.
func serveTest(t *testing.T) string {
	t.Helper()
	o := New("relay", "a", 8*time.Second)
	l, err := Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- o.Serve(ctx, l) }()
	t.Cleanup(func() { cancel(); <-served })
	return l.Addr().String()
}

// partitionHeaders are the HELP and TYPE lines of the metrics a
// partitioned replica adds (see the package doc).
var partitionHeaders = map[string]string{
	"leaderrun_partitions":                 "The number of partitions of the name (--partitions).\ngauge",
	"leaderrun_partitions_owned":           "Partitions this process holds.\ngauge",
	"leaderrun_partition_token":            "Fencing token of each partition this process holds; absent for the others.\ngauge",
	"leaderrun_partition_moves_total":      "Partitions acquired (in) and given up for any cause (out) by this process.\ncounter",
	"leaderrun_reconcile_duration_seconds": "Time one reconcile of the partitions held with the target took, acquisitions included.\nhistogram",
}

func TestPartitionMetrics(t *testing.T) {
	o, clk := newTest(t)
	o.Partitioned(4, func() any { return map[string]int{"partitions": 4} })
	for name, header := range partitionHeaders {
		metricHeaders[name] = header
	}
	t.Cleanup(func() {
		for name := range partitionHeaders {
			delete(metricHeaders, name)
		}
	})
	srv := httptest.NewServer(o.Handler())
	defer srv.Close()

	// /leader means nothing here: it says where to look (issue 37.16).
	if code, _, body := get(t, o.Handler(), "/leader"); code != http.StatusNotFound || !strings.Contains(body, "see /partitions") {
		t.Errorf("GET /leader of a partitioned replica = %d %q, want 404 pointing to /partitions", code, body)
	}

	o.StoreCall("join", time.Millisecond, nil)
	o.PartitionStarted(1, 101)
	o.PartitionStarted(3, 103)
	o.Reconciled(3 * time.Millisecond)
	clk.Advance(time.Second)
	o.StoreCall("renew", 2*time.Millisecond, nil) // a round
	clk.Advance(500 * time.Millisecond)
	scrape(t, srv, `
leaderrun_partitions{name="jobs"} 4
leaderrun_partitions_owned{name="jobs"} 2
leaderrun_partition_token{name="jobs",partition="1"} 101
leaderrun_partition_token{name="jobs",partition="3"} 103
leaderrun_partition_moves_total{direction="in",name="jobs"} 2
leaderrun_partition_moves_total{direction="out",name="jobs"} 0
leaderrun_seconds_since_last_renew{name="jobs"} 0.5
leaderrun_leading{name="jobs"} 0
`)
	o.PartitionEnded(1, fmt.Errorf("partition 1: %w", elect.ErrHandedOff))
	o.PartitionEnded(1, elect.ErrHandedOff) // not held: changes nothing
	o.PartitionEnded(3, lease.ErrLost)
	scrape(t, srv, `
leaderrun_partitions_owned{name="jobs"} 0
leaderrun_partition_moves_total{direction="in",name="jobs"} 2
leaderrun_partition_moves_total{direction="out",name="jobs"} 2
leaderrun_seconds_since_last_renew{name="jobs"} 0
leaderrun_tenures_total{name="jobs"} 2
leaderrun_tenure_ends_total{cause="deadline",name="jobs"} 0
leaderrun_tenure_ends_total{cause="handoff",name="jobs"} 1
leaderrun_tenure_ends_total{cause="lost",name="jobs"} 1
leaderrun_tenure_ends_total{cause="other",name="jobs"} 0
leaderrun_tenure_ends_total{cause="released",name="jobs"} 0
leaderrun_tenure_ends_total{cause="stepdown",name="jobs"} 0
`)
	var hist strings.Builder
	for _, b := range []struct {
		le    string
		count int
	}{{"0.0001", 0}, {"0.001", 0}, {"0.005", 1}, {"0.01", 1}, {"0.05", 1}, {"0.1", 1}, {"0.5", 1}, {"1", 1}, {"5", 1}, {"10", 1}, {"+Inf", 1}} {
		fmt.Fprintf(&hist, "leaderrun_reconcile_duration_seconds_bucket{name=\"jobs\",le=%q} %d\n", b.le, b.count)
	}
	scrape(t, srv, hist.String()+`leaderrun_reconcile_duration_seconds_sum{name="jobs"} 0.003
leaderrun_reconcile_duration_seconds_count{name="jobs"} 1
`)
	code, ctype, body := get(t, o.Handler(), "/partitions")
	if code != http.StatusOK || ctype != "application/json" || strings.TrimSpace(body) != `{"partitions":4}` {
		t.Errorf("GET /partitions = %d %s %q", code, ctype, body)
	}
	if code, _, _ := get(t, o.Handler(), "/leader"); code != http.StatusNotFound {
		t.Errorf("GET /leader of a partitioned replica = %d, want 404", code)
	}
}

// TestSinceLastRenewCountsWhileStoreDown: a tenure that ends at its
// deadline because the store is down does not reset the gauge to 0; it
// goes on counting until the store answers (issue 37.16).
func TestSinceLastRenewCountsWhileStoreDown(t *testing.T) {
	o, clk := newTest(t)
	o.StoreCall("acquire", time.Millisecond, nil)
	o.Elected(1)
	clk.Advance(time.Second)
	o.StoreCall("renew", time.Millisecond, errDown)
	clk.Advance(7 * time.Second)
	o.Ended(elect.ErrDeadline)
	clk.Advance(2 * time.Second)
	if got, want := o.sinceLastRenew(), 10.0; got != want {
		t.Errorf("after the deadline, store down: sinceLastRenew = %v, want %v", got, want)
	}
	o.StoreCall("acquire", time.Millisecond, errDown)
	clk.Advance(time.Second)
	if got, want := o.sinceLastRenew(), 11.0; got != want {
		t.Errorf("store still down: sinceLastRenew = %v, want %v", got, want)
	}
	o.StoreCall("acquire", time.Millisecond, held())
	if got, want := o.sinceLastRenew(), 0.0; got != want {
		t.Errorf("store answered: sinceLastRenew = %v, want %v", got, want)
	}

	// A tenure released with the store up: 0 at once.
	o.StoreCall("acquire", time.Millisecond, nil)
	o.Elected(2)
	clk.Advance(time.Second)
	o.StoreCall("release", time.Millisecond, nil)
	o.Ended(elect.ErrReleased)
	if got, want := o.sinceLastRenew(), 0.0; got != want {
		t.Errorf("released: sinceLastRenew = %v, want %v", got, want)
	}
}

func TestHealthMetrics(t *testing.T) {
	o, _ := newTest(t)
	srv := httptest.NewServer(o.Handler())
	defer srv.Close()
	o.HealthCheck(true)
	o.HealthCheck(false)
	o.HealthCheck(false)
	o.HealthHandover()
	o.HealthRestart()
	o.HealthRestart()
	scrape(t, srv, `
leaderrun_health_checks_total{name="jobs"} 3
leaderrun_health_check_failures_total{name="jobs"} 2
leaderrun_health_handovers_total{name="jobs"} 1
leaderrun_health_restarts_total{name="jobs"} 2
`)
}
