// Package clientgo tests leaderrun beside client-go's leader election, end
// to end: a package of its own, because client-go's leaderelection links
// every API group, and package e2e's test binary is the leaderrun that its
// scripts run.
package clientgo

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
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
	// The coordination client alone: the clientset would link every API
	// group into this test binary, which the scripts run as leaderrun.
	c, err := coordinationv1.NewForConfig(&rest.Config{Host: srv.URL, BearerToken: kubetest.AdminToken,
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
				Client:     c,
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
// other: each side's work starts only after the other's stopped. make
// test-kube runs it; make test skips it.
func TestKubeClientGoHandOver(t *testing.T) {
	srv := kubetest.Start(t) // first: make test skips here
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	ns, err := srv.CreateNamespace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "leaderrun")
	build := exec.Command("go", "build", "-o", bin, "../..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build leaderrun: %v\n%s", err, out)
	}
	kubeconfig := srv.Kubeconfig(t, kubetest.AdminToken, ns)

	first := startClientGoElector(t, srv, ns, "client-go-1")
	if err := awaitCond(func() bool { s, _ := first.times(); return !s.IsZero() }); err != nil {
		t.Fatalf("client-go's elector never led: %v", err)
	}
	log := filepath.Join(dir, "leaderrun.log")
	logf, err := os.Create(log)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	lr := exec.Command(bin, "--name", "relay", "--identity", "leaderrun-0", "--store", "k8s://"+ns+"?kubeconfig="+kubeconfig,
		"--", "sleep", "1000")
	lr.Stdout, lr.Stderr = logf, logf
	lr.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := lr.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { lr.Wait(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(-lr.Process.Pid, syscall.SIGKILL)
		<-done
		if t.Failed() {
			b, _ := os.ReadFile(log)
			t.Logf("leaderrun's log:\n%s", b)
		}
	})
	awaitLog(t, log, `msg="lease held by another; standing by".* leader=client-go-1`)
	first.stop()
	awaitLog(t, log, `msg="child started"`)
	_, stopped := first.times()
	// The log's times are truncated to the millisecond.
	if started := logTimeOf(t, log, `msg="child started"`); started.Before(stopped.Truncate(time.Millisecond)) {
		t.Errorf("leaderrun's command started at %v, client-go's work stopped at %v: they overlapped", started, stopped)
	}

	second := startClientGoElector(t, srv, ns, "client-go-2")
	lr.Process.Signal(os.Interrupt)
	<-done
	if err := awaitCond(func() bool { s, _ := second.times(); return !s.IsZero() }); err != nil {
		t.Fatalf("client-go's elector never took the Lease leaderrun released: %v", err)
	}
	started, _ := second.times()
	if ended := logTimeOf(t, log, `msg="command stopped"`); ended.IsZero() || !started.After(ended) {
		t.Errorf("client-go's work started at %v, leaderrun's command stopped at %v: they overlapped", started, ended)
	}
}

// waitLimit bounds every wait: generous, never a timing assertion.
const waitLimit = 30 * time.Second

// awaitLog waits until the log at path matches re.
func awaitLog(t *testing.T, path, re string) {
	t.Helper()
	rx := regexp.MustCompile(re)
	if err := awaitCond(func() bool { b, _ := os.ReadFile(path); return rx.Match(b) }); err != nil {
		t.Fatalf("%s: no match for %s within %v", path, re, waitLimit)
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
