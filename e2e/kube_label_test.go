package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/testenv/kubetest"
)

// The leader label (--leader-label) against a real API server, with
// leaderrun processes as a Deployment's pods would run them: each replica
// is given a Pod object of its own (no kubelet runs pods here), POD_NAME
// and POD_NAMESPACE, and a kubeconfig. make test-kube runs these; make
// test skips them.

const leaderLabel = "role=leader"

// kubeReplicas is a set of leaderrun replicas on one namespace of srv.
type kubeReplicas struct {
	t        *testing.T
	srv      *kubetest.Server
	ns       string
	dir      string
	prog     string   // leaderrun: this test binary, by that name
	store    string   // --store
	env      []string // besides POD_NAME, POD_NAMESPACE
	replicas map[string]*kubeReplica
	// spec, when set, gives a pod's replica its arguments (after
	// leaderrun) and environment (besides PATH and HOME) instead.
	spec func(pod string) (args, env []string)
	// create, when set, creates a pod's object instead.
	create func(ctx context.Context, pod string) error
	label  string // the label it sets (selector)

	mu       sync.Mutex
	twice    []string // the polls that found more than one pod labelled
	polls    int
	pollErrs int
}

type kubeReplica struct {
	pod  string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

// newKubeReplicas readies replicas that reach srv as the user of token,
// in namespace ns (empty: a new one).
func newKubeReplicas(t *testing.T, srv *kubetest.Server, token, ns string) *kubeReplicas {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	if ns == "" {
		var err error
		if ns, err = srv.CreateNamespace(ctx); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	prog := filepath.Join(dir, "leaderrun") // TestMain runs leaderrun by this name
	if err := os.Symlink(os.Args[0], prog); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := srv.WriteKubeconfig(kubeconfig, token, ns); err != nil {
		t.Fatal(err)
	}
	k := &kubeReplicas{t: t, srv: srv, ns: ns, dir: dir, prog: prog, replicas: map[string]*kubeReplica{}, label: leaderLabel,
		store: "k8s://" + ns + "?kubeconfig=" + kubeconfig, env: []string{"KUBECONFIG=" + kubeconfig}}
	t.Cleanup(k.stopAll)
	return k
}

// start creates the pod's object, as the Deployment would, and starts its
// replica.
func (k *kubeReplicas) start(pod string) *kubeReplica {
	k.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	create := func(ctx context.Context, pod string) error {
		return k.srv.CreatePod(ctx, k.ns, pod, map[string]string{"app": "relay"})
	}
	if k.create != nil {
		create = k.create
	}
	if err := create(ctx, pod); err != nil && !strings.Contains(err.Error(), "409 Conflict") {
		k.t.Fatal(err)
	}
	r := &kubeReplica{pod: pod, log: filepath.Join(k.dir, pod+".log"), done: make(chan struct{})}
	logf, err := os.Create(r.log)
	if err != nil {
		k.t.Fatal(err)
	}
	defer logf.Close()
	// A short lease: a crashed leader's expires within the waits.
	args := []string{"--name", "relay", "--identity", pod, "--store", k.store, "--ttl", "4s", "--kill-grace", "1s",
		"--leader-label", leaderLabel, "--log-level", "debug", "--", "sleep", "1000"}
	env := append([]string{"POD_NAME=" + pod, "POD_NAMESPACE=" + k.ns}, k.env...)
	if k.spec != nil {
		args, env = k.spec(pod)
	}
	r.cmd = exec.Command(k.prog, args...)
	r.cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + k.dir}, env...)
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := r.cmd.Start(); err != nil {
		k.t.Fatal(err)
	}
	go func() { r.cmd.Wait(); close(r.done) }()
	k.replicas[pod] = r
	return r
}

// stopAll stops every replica (SIGKILL: each command is in a PID
// namespace of its replica's, and dies with it) and shows their logs when
// the test failed.
func (k *kubeReplicas) stopAll() {
	for _, pod := range slices.Sorted(func(yield func(string) bool) {
		for p := range k.replicas {
			if !yield(p) {
				return
			}
		}
	}) {
		r := k.replicas[pod]
		syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-r.done
		if k.t.Failed() {
			b, _ := os.ReadFile(r.log)
			k.t.Logf("%s's log:\n%s", pod, b)
		}
	}
}

// awaitLog waits until the replica's log matches re.
func (k *kubeReplicas) awaitLog(r *kubeReplica, re string) {
	k.t.Helper()
	rx := regexp.MustCompile(re)
	for deadline := time.Now().Add(waitLimit); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(r.log); err == nil && rx.Match(b) {
			return
		}
	}
	k.t.Fatalf("%s's log: no match for %s within %v", r.pod, re, waitLimit)
}

// leader waits until one of the running replicas is elected, and returns
// it.
func (k *kubeReplicas) leader(not ...*kubeReplica) *kubeReplica {
	k.t.Helper()
	for deadline := time.Now().Add(waitLimit); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		for _, r := range k.replicas {
			select {
			case <-r.done:
				continue
			default:
			}
			if slices.Contains(not, r) {
				continue
			}
			if b, err := os.ReadFile(r.log); err == nil && strings.Contains(string(b), `msg="child started"`) {
				return r
			}
		}
	}
	k.t.Fatalf("no replica elected within %v", waitLimit)
	return nil
}

// labelled is the pods that carry the label now.
func (k *kubeReplicas) labelled() ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	return k.srv.Labelled(ctx, k.ns, k.label)
}

// awaitLabelled waits until the pods that carry the label are want.
func (k *kubeReplicas) awaitLabelled(want ...string) {
	k.t.Helper()
	k.srv.AwaitLabelled(k.t, k.ns, k.label, want...)
}

// lead starts n replicas, relay-0 to relay-N-1, and returns the one
// elected, once its pod carries the label.
func (k *kubeReplicas) lead(n int) *kubeReplica {
	k.t.Helper()
	for i := range n {
		k.start(fmt.Sprintf("relay-%d", i))
	}
	r := k.leader()
	k.awaitLabelled(r.pod)
	return r
}

// poll reads the labelled pods every few milliseconds until stop is
// called, counting the polls that find two or more.
func (k *kubeReplicas) poll() (stop func()) {
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-quit:
				return
			case <-time.After(2 * time.Millisecond):
			}
			got, err := k.labelled()
			k.mu.Lock()
			k.polls++
			if err != nil {
				k.pollErrs++
			} else if len(got) > 1 {
				k.twice = append(k.twice, fmt.Sprintf("%s: %q", time.Now().Format("15:04:05.000000"), got))
			}
			k.mu.Unlock()
		}
	}()
	return func() { close(quit); <-done }
}

// neverTwice checks that no poll found two pods labelled, and that there
// were polls.
func (k *kubeReplicas) neverTwice() {
	k.t.Helper()
	k.mu.Lock()
	defer k.mu.Unlock()
	if len(k.twice) > 0 {
		k.t.Errorf("%d of %d polls found more than one pod labelled: %q", len(k.twice), k.polls, k.twice)
	}
	if k.polls-k.pollErrs == 0 {
		k.t.Errorf("only %d polls answered (%d failed): the check saw nothing", k.polls-k.pollErrs, k.pollErrs)
	}
	k.t.Logf("%d polls of the labelled pods, %d failed", k.polls, k.pollErrs)
}

// TestKubeLeaderLabel: the label follows the leader. One API server; each
// part in a namespace of its own.
func TestKubeLeaderLabel(t *testing.T) {
	srv := kubetest.Start(t)

	// Graceful hand-offs (SIGTERM, as a pod's deletion sends): the old
	// pod loses the label before the new one gets it; polled every few
	// milliseconds, never two pods carry it.
	t.Run("handoff", func(t *testing.T) {
		k := newKubeReplicas(t, srv, kubetest.AdminToken, "")
		old := k.lead(3)
		stop := k.poll()
		for round := range 3 {
			old.cmd.Process.Signal(syscall.SIGTERM)
			next := k.leader(old)
			k.awaitLabelled(next.pod)
			<-old.done
			k.start(fmt.Sprintf("relay-%d", 3+round)) // the Deployment's replacement
			old = next
		}
		stop()
		k.neverTwice()
	})

	// A crash (SIGKILL): the dead pod keeps the label until the next
	// leader, taking over, removes it.
	t.Run("crash", func(t *testing.T) {
		k := newKubeReplicas(t, srv, kubetest.AdminToken, "")
		old := k.lead(2)
		old.cmd.Process.Kill()
		<-old.done
		next := k.leader(old)
		k.awaitLabelled(next.pod)
		k.awaitLog(next, `msg="removed the leader label from another pod, a former leader's".* other=`+k.ns+"/"+old.pod)
	})

	// No permission on pods (a Role with the leases' verbs only): a clear
	// warning naming what the Role lacks, and leading goes on.
	t.Run("forbidden", func(t *testing.T) {
		k := newKubeReplicas(t, srv, kubetest.Users["alice"], "")
		ctx, cancel := context.WithTimeout(context.Background(), waitLimit)
		defer cancel()
		if err := srv.Grant(ctx, k.ns, "leases", "alice", kubetest.LeaseRule); err != nil {
			t.Fatal(err)
		}
		r := k.start("relay-0")
		k.awaitLog(r, `msg="child started"`)
		k.awaitLog(r, `level=WARN msg="cannot label this pod as the leader's; leading goes on.* cause=forbidden .*rbac="the service account needs patch on pods in namespace `+k.ns)
		if got, err := k.labelled(); err != nil || len(got) > 0 {
			t.Errorf("pods labelled %q, %v; want none", got, err)
		}
		select {
		case <-r.done:
			t.Fatal("leaderrun exited")
		default:
		}
	})

	// Leases in SQLite, the API server for the label alone; the API
	// server lost: the label stays on the pod whose leader stopped
	// meanwhile, and the next leader removes it once the server is back.
	// Last: it kills and restarts the server.
	t.Run("sqlite-lost-apiserver", func(t *testing.T) {
		k := newKubeReplicas(t, srv, kubetest.AdminToken, "")
		k.store = "sqlite:" + filepath.Join(k.dir, "leases.db")
		old := k.lead(2)
		stop := k.poll()
		old.cmd.Process.Signal(syscall.SIGTERM)
		next := k.leader(old)
		k.awaitLabelled(next.pod)
		<-old.done
		stop()
		k.neverTwice()

		k.awaitLog(k.start("relay-2"), `msg=campaigning`)
		old = next
		if err := srv.Kill(kubetest.APIServer); err != nil {
			t.Fatal(err)
		}
		old.cmd.Process.Signal(syscall.SIGTERM)
		next = k.leader(old)
		<-old.done
		k.awaitLog(old, `level=WARN msg="(could not remove the leader label within its time|cannot remove the leader label from this pod)`)
		if err := srv.Restart(kubetest.APIServer); err != nil {
			t.Fatal(err)
		}
		k.awaitLabelled(next.pod)
		k.awaitLog(next, `msg="removed the leader label from another pod, a former leader's".* other=`+k.ns+"/"+old.pod)
	})
}
