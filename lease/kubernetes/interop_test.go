package kubernetes

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/leaderrun/leaderrun/lease"
)

// elector runs a client-go elector for name as identity until the
// returned stop is called; leading reports each change of its leadership.
func elector(t *testing.T, c kubernetes.Interface, ns, name, identity string, release bool) (leading <-chan bool, stop func()) {
	t.Helper()
	ch := make(chan bool, 16)
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: name, Namespace: ns},
		Client:     c.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   2 * time.Second,
			RenewDeadline:   1500 * time.Millisecond,
			RetryPeriod:     200 * time.Millisecond,
			ReleaseOnCancel: release,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(context.Context) { ch <- true },
				OnStoppedLeading: func() { ch <- false },
			},
		})
	}()
	var once bool
	stop = func() {
		if !once {
			once = true
			cancel()
			<-done
		}
	}
	t.Cleanup(stop)
	return ch, stop
}

func wantLeading(t *testing.T, ch <-chan bool, want bool) {
	t.Helper()
	select {
	case got := <-ch:
		if got != want {
			t.Fatalf("client-go elector leading = %v, want %v", got, want)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("client-go elector never reported leading = %v", want)
	}
}

// TestClientGoHolderIsRespected: a Lease a client-go elector holds and
// renews is never taken, however long leaderrun tries; once the elector
// releases it, leaderrun takes it with a token, and the elector then
// respects leaderrun's tenure until leaderrun releases it.
func TestClientGoHolderIsRespected(t *testing.T) {
	srv, c := admin(t)
	ns := namespace(t)
	s := mustOpen(t, srv, adminToken(), ns)
	leading, stop := elector(t, c, ns, "shared", "client-go-1", true)
	wantLeading(t, leading, true)
	// Three lease durations of the elector's, each attempt refused.
	for deadline := time.Now().Add(6 * time.Second); time.Now().Before(deadline); time.Sleep(300 * time.Millisecond) {
		_, err := s.Acquire(testCtx(t), "shared", "leaderrun-1", 10*time.Second)
		var held *lease.HeldError
		if !errors.As(err, &held) {
			t.Fatalf("Acquire while client-go's elector renews = %v, want *lease.HeldError", err)
		}
		if held.Record.Holder != "client-go-1" {
			t.Fatalf("held by %q, want client-go-1", held.Record.Holder)
		}
	}
	stop() // releases: an empty holderIdentity
	rec, err := s.Acquire(testCtx(t), "shared", "leaderrun-1", 10*time.Second)
	if err != nil {
		t.Fatalf("Acquire after client-go's elector released: %v", err)
	}
	// A second elector does not take leaderrun's renewed tenure.
	leading2, stop2 := elector(t, c, ns, "shared", "client-go-2", true)
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if _, err := s.Renew(testCtx(t), "shared", "leaderrun-1", rec.Token, 10*time.Second); err != nil {
			t.Fatalf("Renew while a client-go elector campaigns: %v", err)
		}
		select {
		case <-leading2:
			t.Fatal("the client-go elector took leaderrun's tenure")
		default:
		}
	}
	if err := s.Release(testCtx(t), "shared", "leaderrun-1", rec.Token); err != nil {
		t.Fatalf("Release: %v", err)
	}
	wantLeading(t, leading2, true)
	stop2()
}

// TestCrashedClientGoHolderExpires: an elector that stops without
// releasing leaves a Lease that leaderrun takes once it has stayed
// unchanged for its duration.
func TestCrashedClientGoHolderExpires(t *testing.T) {
	srv, c := admin(t)
	ns := namespace(t)
	s := mustOpen(t, srv, adminToken(), ns)
	leading, stop := elector(t, c, ns, "shared", "client-go-1", false)
	wantLeading(t, leading, true)
	stop()
	var err error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if _, err = s.Acquire(testCtx(t), "shared", "leaderrun-1", 10*time.Second); err == nil {
			return
		}
	}
	t.Fatalf("Acquire of a crashed elector's Lease: %v", err)
}
