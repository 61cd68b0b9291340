package podlabel

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/testenv/kubetest"
	"github.com/leaderrun/leaderrun/internal/testenv/tcpproxy"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }

// waitLimit bounds every wait for an event: generous, never a timing
// assertion.
const waitLimit = 30 * time.Second

// logBuffer is a log that tests read while it is written.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// count is how many lines of the log hold every one of parts.
func (l *logBuffer) count(parts ...string) int {
	n := 0
	for _, line := range strings.Split(l.String(), "\n") {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) }) {
			n++
		}
	}
	return n
}

// fixture is a namespace of the shared server with pods in it.
type fixture struct {
	t   *testing.T
	srv *kubetest.Server
	ns  string
}

func newFixture(t *testing.T, pods ...string) *fixture {
	t.Helper()
	srv := kubetest.Shared(t)
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	ns, err := srv.CreateNamespace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if err := srv.CreatePod(ctx, ns, p, map[string]string{"app": "relay"}); err != nil {
			t.Fatal(err)
		}
	}
	return &fixture{t, srv, ns}
}

var leader = Label{"role", "leader"}

// labeler starts the Labeler of pod as the user of token, reaching the
// server at addr (empty: the server's own), logging into the returned log.
func (f *fixture) labeler(pod, token, addr string) (*Labeler, *logBuffer) {
	f.t.Helper()
	kubeconfig := filepath.Join(f.t.TempDir(), "kubeconfig")
	if addr == "" {
		addr = f.srv.Addr()
	}
	if err := f.srv.WriteKubeconfigVia(kubeconfig, addr, token, f.ns); err != nil {
		f.t.Fatal(err)
	}
	a, _, err := newAPI("k8s://" + f.ns + "?kubeconfig=" + kubeconfig)
	if err != nil {
		f.t.Fatal(err)
	}
	log := &logBuffer{}
	lb := start(a, Pod{f.ns, pod}, leader, slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})))
	f.t.Cleanup(lb.Close)
	return lb, log
}

// awaitLabelled waits until the pods that carry the label are want.
func (f *fixture) awaitLabelled(want ...string) {
	f.t.Helper()
	f.srv.AwaitLabelled(f.t, f.ns, leader.String(), want...)
}

func (f *fixture) labelled() ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	return f.srv.Labelled(ctx, f.ns, leader.String())
}

// label sets the label on pod as the admin: what a former leader left.
func (f *fixture) label(pod string) {
	f.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	patch := map[string]any{"metadata": map[string]any{"labels": map[string]string{leader.Key: leader.Value}}}
	if _, err := f.srv.Admin(ctx, "PATCH", "/api/v1/namespaces/"+f.ns+"/pods/"+pod, patch); err != nil {
		f.t.Fatal(err)
	}
}

// returns calls f and fails t when it does not return within waitLimit.
func returns(t *testing.T, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { f(); close(done) }()
	select {
	case <-done:
	case <-time.After(waitLimit):
		t.Fatal("it did not return")
	}
}

func awaitLog(t *testing.T, log *logBuffer, n int, parts ...string) {
	t.Helper()
	for deadline := time.Now().Add(waitLimit); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if log.count(parts...) >= n {
			return
		}
	}
	t.Fatalf("the log has fewer than %d lines with %q:\n%s", n, parts, log)
}

// TestLabelWhileTheCommandRuns: Started labels the pod, Ended removes the
// label; the other pods are left alone.
func TestLabelWhileTheCommandRuns(t *testing.T) {
	f := newFixture(t, "relay-a", "relay-b")
	lb, log := f.labeler("relay-a", kubetest.AdminToken, "")
	lb.Started()
	f.awaitLabelled("relay-a")
	awaitLog(t, log, 1, `msg="labelled this pod as the leader's"`)
	lb.Ended()
	f.awaitLabelled()
	awaitLog(t, log, 1, `msg="removed the leader label from this pod"`)
	lb.Started()
	f.awaitLabelled("relay-a")
	awaitLog(t, log, 2, `msg="labelled this pod as the leader's"`)
}

// TestTakeoverRemovesTheLabelFromOtherPods: a new leader removes the label
// from every other pod that carries it (a crashed leader's), and labels
// its own.
func TestTakeoverRemovesTheLabelFromOtherPods(t *testing.T) {
	f := newFixture(t, "relay-a", "relay-b", "relay-c")
	f.label("relay-b")
	f.label("relay-c")
	lb, log := f.labeler("relay-a", kubetest.AdminToken, "")
	lb.Started()
	f.awaitLabelled("relay-a")
	if n := log.count(`msg="removed the leader label from another pod, a former leader's"`); n != 2 {
		t.Errorf("said %d removals from other pods, want 2:\n%s", n, log)
	}
}

// TestForbiddenIsSaidOnceAndNamesTheRBAC: a pod whose user may not list
// and patch pods is said so once per cause, naming the verb the Role
// lacks, however often it is tried again; Ended still returns.
func TestForbiddenIsSaidOnceAndNamesTheRBAC(t *testing.T) {
	f := newFixture(t, "relay-a")
	lb, log := f.labeler("relay-a", kubetest.Users["bob"], "")
	lb.Started()
	// Three failed attempts: the first and two retries.
	awaitLog(t, log, 3, "level=DEBUG", "trying again")
	for _, verb := range []string{"list", "patch"} {
		if n := log.count("level=WARN", "cause=forbidden", "the service account needs "+verb+" on pods in namespace "+f.ns); n != 1 {
			t.Errorf("warned %d times of the missing %s, want once:\n%s", n, verb, log)
		}
	}
	if strings.Contains(log.String(), kubetest.Users["bob"]) {
		t.Errorf("the log shows the user's token:\n%s", log)
	}
	returns(t, lb.Ended)
}

// TestEndedWaitsForAnUnansweredRemovalBriefly: when the API server stops
// answering, Ended gives up on the removal after its time and says so (the
// label never holds up the hand-off), and the removal is tried again
// until the server answers.
func TestEndedWaitsForAnUnansweredRemovalBriefly(t *testing.T) {
	f := newFixture(t, "relay-a")
	proxy, err := tcpproxy.New(f.srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	lb, log := f.labeler("relay-a", kubetest.AdminToken, proxy.Addr())
	lb.Started()
	f.awaitLabelled("relay-a")
	proxy.Blackhole()
	returns(t, lb.Ended)
	if n := log.count("level=WARN", "could not remove the leader label within its time"); n != 1 {
		t.Errorf("said %d times that the removal was given up on, want once:\n%s", n, log)
	}
	if got, err := f.labelled(); err != nil || !slices.Equal(got, []string{"relay-a"}) {
		t.Errorf("pods labelled while the server did not answer: %q, %v; want the label left on relay-a", got, err)
	}
	proxy.Reset()
	proxy.Pass()
	f.awaitLabelled()
}
