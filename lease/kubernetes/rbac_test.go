package kubernetes

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/leaderrun/leaderrun/internal/testenv/kubetest"
	"github.com/leaderrun/leaderrun/lease"
)

// manifest reads a file of packaging/kubernetes with its namespace set to
// ns.
func manifest(t *testing.T, file, ns string) string {
	t.Helper()
	_, self, _, _ := runtime.Caller(0)
	b, err := os.ReadFile(filepath.Join(filepath.Dir(self), "..", "..", "packaging", "kubernetes", file))
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(b), "namespace: default", "namespace: "+ns)
}

// apply creates every object of a multi-document manifest, as kubectl
// apply would on a fresh namespace, and returns them.
func apply(t *testing.T, c kubernetes.Interface, text string) []any {
	t.Helper()
	var objs []any
	for _, doc := range strings.Split(text, "\n---\n") {
		obj, gvk, err := scheme.Codecs.UniversalDeserializer().Decode([]byte(doc), nil, nil)
		if err != nil {
			t.Fatalf("decode %q: %v", doc, err)
		}
		ctx := testCtx(t)
		switch o := obj.(type) {
		case *corev1.ServiceAccount:
			_, err = c.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = c.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = c.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		default:
			t.Fatalf("apply: no client here for %v", gvk)
		}
		if err != nil {
			t.Fatalf("the API server refused the %s: %v", gvk.Kind, err)
		}
		objs = append(objs, obj)
	}
	return objs
}

// serviceAccountToken asks the server for a token of the ServiceAccount
// name, as the kubelet does for a pod.
func serviceAccountToken(t *testing.T, c kubernetes.Interface, ns, name string) string {
	t.Helper()
	tr, err := c.CoreV1().ServiceAccounts(ns).CreateToken(testCtx(t), name, &authnv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// exercise runs what a leader and a follower do, as the user of s.
func exercise(t *testing.T, s, follower lease.Store) {
	t.Helper()
	ctx := testCtx(t)
	rec, err := s.Acquire(ctx, "relay", "pod-a", 10*time.Second)
	if err != nil {
		t.Fatalf("Acquire: %v", err)
	}
	if _, err := s.Renew(ctx, "relay", "pod-a", rec.Token, 10*time.Second); err != nil {
		t.Fatalf("Renew: %v", err)
	}
	var held *lease.HeldError
	if _, err := follower.Acquire(ctx, "relay", "pod-b", 10*time.Second); !errors.As(err, &held) {
		t.Fatalf("follower's Acquire = %v, want *lease.HeldError", err)
	}
	woke := make(chan error, 1)
	go func() { woke <- follower.Wait(ctx, "relay", held.Record, 20*time.Second) }()
	if err := s.Release(ctx, "relay", "pod-a", rec.Token); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if err := <-woke; err != nil {
		t.Fatalf("Wait: %v", err)
	}
	next, err := follower.Acquire(ctx, "relay", "pod-b", 10*time.Second)
	if err != nil || next.Token <= rec.Token {
		t.Fatalf("follower's Acquire after the release = %+v, %v; want a larger token than %d", next, err, rec.Token)
	}
	if _, err := s.List(ctx); err != nil {
		t.Fatalf("List: %v", err)
	}
	if _, err := s.Join(ctx, "ingest", 4, "pod-a", 10*time.Second); err != nil {
		t.Fatalf("Join: %v", err)
	}
	if err := s.Leave(ctx, "ingest", "pod-a"); err != nil {
		t.Fatalf("Leave: %v", err)
	}
}

// TestShippedRBACIsEnough applies packaging/kubernetes/rbac.yaml and runs
// a leader and a follower as its ServiceAccount: the Role is all they
// need.
func TestShippedRBACIsEnough(t *testing.T) {
	srv, c := admin(t)
	ns := namespace(t)
	apply(t, c, manifest(t, "rbac.yaml", ns))
	token := serviceAccountToken(t, c, ns, "leaderrun")
	// RBAC takes a moment to see a new binding.
	var s *Store
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if s, err = openAs(t, srv, token, ns); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("Open as the ServiceAccount of rbac.yaml: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	exercise(t, s, mustOpen(t, srv, token, ns))
}

// TestMissingPermissionsAreNamed opens the store as users granted less
// than the shipped Role: Open refuses, naming what is missing.
func TestMissingPermissionsAreNamed(t *testing.T) {
	srv, c := admin(t)
	ns := namespace(t)
	for _, tc := range []struct {
		user  string
		verbs []string // granted
		want  string
	}{
		{"bob", nil, "may not get, list, watch, create, update leases"},
		{"alice", []string{"get", "list", "create", "update"}, "may not watch leases"},
	} {
		if tc.verbs != nil {
			role := &rbacv1.Role{
				ObjectMeta: metav1.ObjectMeta{Name: tc.user, Namespace: ns},
				Rules:      []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: tc.verbs}},
			}
			if _, err := c.RbacV1().Roles(ns).Create(testCtx(t), role, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			binding := &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: tc.user, Namespace: ns},
				RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: tc.user},
				Subjects:   []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: tc.user}},
			}
			if _, err := c.RbacV1().RoleBindings(ns).Create(testCtx(t), binding, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		// RBAC takes a moment to see a new binding.
		var err error
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
			if _, err = openAs(t, srv, kubetest.Users[tc.user], ns); err != nil && strings.Contains(err.Error(), tc.want) {
				break
			}
		}
		if !errors.Is(err, lease.ErrRefused) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open as %s (granted %v) = %v; want a refusal saying %q", tc.user, tc.verbs, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), kubetest.Users[tc.user]) {
			t.Errorf("the error shows the user's token: %v", err)
		}
	}
}
