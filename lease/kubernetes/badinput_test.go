package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leaderrun/leaderrun/internal/testenv/citest"
	"github.com/leaderrun/leaderrun/lease"
)

func TestBadDSNIsRefused(t *testing.T) {
	for _, dsn := range []string{
		"k8s://Not_A_Namespace",
		"k8s://ns?colour=blue",
		"k8s://ns?kubeconfig=/nonexistent/kubeconfig",
		"k8s://ns/extra/path",
		"k8s://user:secret@ns",
	} {
		_, err := Open(context.Background(), dsn)
		if !errors.Is(err, lease.ErrRefused) {
			t.Errorf("Open(%q) = %v, want an error wrapping lease.ErrRefused", dsn, err)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q) error shows the password: %v", dsn, err)
		}
	}
}

// TestUnreachableServerIsRetried: an API server nobody listens for is a
// plain error, which leaderrun retries, naming the server.
func TestUnreachableServerIsRetried(t *testing.T) {
	port, err := citest.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:%d\ncontexts:\n- name: c\n  context:\n    cluster: c\n    user: u\nusers:\n- name: u\n  user:\n    token: hunter2\ncurrent-context: c\n", port)
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	_, err = Open(ctx, "k8s://ns?kubeconfig="+kubeconfig)
	if err == nil || errors.Is(err, lease.ErrRefused) {
		t.Fatalf("Open of an unreachable server = %v, want a plain error", err)
	}
	if !strings.Contains(err.Error(), fmt.Sprint(port)) || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error %q: want the server named and no token", err)
	}
}

func TestMissingNamespaceIsRefused(t *testing.T) {
	srv, _ := admin(t)
	s := mustOpen(t, srv, adminToken(), "lrtest-no-such-namespace")
	_, err := s.Acquire(testCtx(t), "relay", "a", 10*time.Second)
	if !errors.Is(err, lease.ErrRefused) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("Acquire in a missing namespace = %v, want a refusal saying it does not exist", err)
	}
}

// TestHandEditedLease: a Lease whose holder was changed by hand, or which
// was deleted, ends the tenure (Renew reports it lost), and the token
// still grows.
func TestHandEditedLease(t *testing.T) {
	srv, c := admin(t)
	ns := namespace(t)
	s := mustOpen(t, srv, adminToken(), ns)
	leases := c.CoordinationV1().Leases(ns)
	rec, err := s.Acquire(testCtx(t), "relay", "a", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	l, err := leases.Get(testCtx(t), "relay", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	intruder := "intruder"
	l.Spec.HolderIdentity = &intruder
	if _, err := leases.Update(testCtx(t), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Renew(testCtx(t), "relay", "a", rec.Token, 10*time.Second); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Renew after the holder was changed by hand = %v, want ErrLost", err)
	}
	var held *lease.HeldError
	if _, err := s.Acquire(testCtx(t), "relay", "b", 10*time.Second); !errors.As(err, &held) || held.Record.Holder != intruder {
		t.Errorf("Acquire of a Lease held by hand = %v, want held by %s", err, intruder)
	}
	if err := leases.Delete(testCtx(t), "relay", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Renew(testCtx(t), "relay", "a", rec.Token, 10*time.Second); !errors.Is(err, lease.ErrLost) {
		t.Errorf("Renew after the Lease was deleted = %v, want ErrLost", err)
	}
	next, err := s.Acquire(testCtx(t), "relay", "b", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if next.Token <= rec.Token {
		t.Errorf("token after the Lease was deleted = %d, want > %d", next.Token, rec.Token)
	}
}
