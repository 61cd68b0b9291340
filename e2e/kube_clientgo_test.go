package e2e

import (
	"context"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/leaderrun/leaderrun/internal/testenv/kubetest"
)

// clientGoElector is a client-go leader election on the Lease "relay",
// as a program that migrates to leaderrun would run one: its work runs
// while the context OnStartedLeading was given lasts (which ends before
// ReleaseOnCancel writes the release).
type clientGoElector struct {
	mu               sync.Mutex
	started, stopped time.Time // its work's
	cancel           func()
	done             chan struct{}
}

func startClientGoElector(t *testing.T, srv *kubetest.Server, ns, identity string) *clientGoElector {
	t.Helper()
	c, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL, BearerToken: kubetest.AdminToken,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &clientGoElector{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(e.done)
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock: &resourcelock.LeaseLock{
				LeaseMeta:  metav1.ObjectMeta{Name: "relay", Namespace: ns},
				Client:     c.CoordinationV1(),
				LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
			},
			LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 200 * time.Millisecond,
			ReleaseOnCancel: true,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(work context.Context) {
					e.mu.Lock()
					e.started = time.Now()
					e.mu.Unlock()
					<-work.Done() // the work stops here, before the release
					e.mu.Lock()
					e.stopped = time.Now()
					e.mu.Unlock()
				},
				OnStoppedLeading: func() {},
			},
		})
	}()
	t.Cleanup(e.stop)
	return e
}

// stop cancels the election (client-go releases the Lease) and waits.
func (e *clientGoElector) stop() {
	e.cancel()
	<-e.done
}

func (e *clientGoElector) times() (started, stopped time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.started, e.stopped
}

// TestKubeClientGoHandOver: a leaderrun replica and client-go's elector
// hand one Lease back and forth, as during a migration from one to the
// other: each side's work starts only after the other's stopped.
func TestKubeClientGoHandOver(t *testing.T) {
	srv := kubetest.Start(t)
	k := newKubeReplicas(t, srv, kubetest.AdminToken, "")

	first := startClientGoElector(t, srv, k.ns, "client-go-1")
	if err := awaitCond(func() bool { s, _ := first.times(); return !s.IsZero() }); err != nil {
		t.Fatalf("client-go's elector never led: %v", err)
	}
	r := k.start("relay-0")
	k.awaitLog(r, `msg="lease held by another; standing by".* leader=client-go-1`)
	first.stop()
	k.awaitLog(r, `msg="child started"`)
	_, stopped := first.times()
	// The log's times are truncated to the millisecond.
	if started := logTimeOf(t, r.log, `msg="child started"`); started.Before(stopped.Truncate(time.Millisecond)) {
		t.Errorf("leaderrun's command started at %v, client-go's work stopped at %v: they overlapped", started, stopped)
	}

	second := startClientGoElector(t, srv, k.ns, "client-go-2")
	k.awaitLog(r, `msg="labelled this pod as the leader's"`)
	r.cmd.Process.Signal(os.Interrupt)
	<-r.done
	if err := awaitCond(func() bool { s, _ := second.times(); return !s.IsZero() }); err != nil {
		t.Fatalf("client-go's elector never took the Lease leaderrun released: %v", err)
	}
	started, _ := second.times()
	if ended := logTimeOf(t, r.log, `msg="command stopped"`); ended.IsZero() || !started.After(ended) {
		t.Errorf("client-go's work started at %v, leaderrun's command stopped at %v: they overlapped", started, ended)
	}
}

// logTimeOf is the time of the first line of the log at path that
// matches re.
func logTimeOf(t *testing.T, path, re string) time.Time {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rx := regexp.MustCompile(re)
	for _, line := range strings.Split(string(b), "\n") {
		if !rx.MatchString(line) {
			continue
		}
		if v, ok := strings.CutPrefix(strings.Fields(line)[0], "time="); ok {
			if at, err := time.Parse(time.RFC3339Nano, v); err == nil {
				return at
			}
		}
	}
	t.Fatalf("no line of %s matches %s", path, re)
	return time.Time{}
}

// awaitCond waits until ok, for at most waitLimit.
func awaitCond(ok func() bool) error {
	for deadline := time.Now().Add(waitLimit); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if ok() {
			return nil
		}
	}
	return context.DeadlineExceeded
}
