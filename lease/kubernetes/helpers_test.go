package kubernetes

import (
	"context"
	"os"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/leaderrun/leaderrun/internal/testenv/kubetest"
	"github.com/leaderrun/leaderrun/lease"
)

func TestMain(m *testing.M) { os.Exit(kubetest.Main(m)) }

// admin returns a client of the shared server with every permission.
func admin(t testing.TB) (*kubetest.Server, kubernetes.Interface) {
	t.Helper()
	srv := kubetest.Shared(t)
	c, err := kubernetes.NewForConfig(&rest.Config{
		Host: srv.URL, BearerToken: kubetest.AdminToken,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	return srv, c
}

// namespace creates a namespace of the test's own on the shared server.
func namespace(t testing.TB) string {
	t.Helper()
	ns, err := kubetest.Shared(t).CreateNamespace(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return ns
}

// openAs opens a store on namespace ns as the user of token.
func openAs(t testing.TB, srv *kubetest.Server, token, ns string) (*Store, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return Open(ctx, "k8s://"+ns+"?kubeconfig="+srv.Kubeconfig(t, token, ""))
}

func mustOpen(t testing.TB, srv *kubetest.Server, token, ns string) *Store {
	t.Helper()
	s, err := openAs(t, srv, token, ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

var _ lease.Store = (*Store)(nil)

func adminToken() string { return kubetest.AdminToken }
