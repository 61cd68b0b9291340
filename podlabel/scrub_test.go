package podlabel

import (
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// TestWarningsHideCredentials: a server (or a proxy before it) that echoes
// the request's Authorization header in its error never gets the token
// into the leader label's warnings.
func TestWarningsHideCredentials(t *testing.T) {
	const token = "podlabel-secret-token-4e1f9a"
	var echoed atomic.Int64
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.Contains(r.Header.Get("Authorization"), token) {
			echoed.Add(1)
		}
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, "upstream failed; request had Authorization: %s", r.Header.Get("Authorization"))
	}))
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: %q, insecure-skip-tls-verify: true}
users:
- name: u
  user: {token: %q}
contexts:
- name: c
  context: {cluster: c, user: u, namespace: relay}
current-context: c
`, srv.URL, token)
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	a, _, err := newAPI("k8s://relay?kubeconfig=" + kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	logged := &logBuffer{}
	lb := start(a, Pod{"relay", "relay-a"}, leader, slog.New(slog.NewTextHandler(logged, nil)))
	t.Cleanup(lb.Close)
	lb.Started()
	awaitLog(t, logged, 1, "level=WARN", "cannot label this pod")
	if echoed.Load() == 0 {
		t.Fatal("the server never saw the token: the test shows nothing")
	}
	if strings.Contains(logged.String(), token) {
		t.Errorf("a warning shows the token:\n%s", logged)
	}
}
