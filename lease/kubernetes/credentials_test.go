package kubernetes

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"log"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/leaderrun/leaderrun/lease"
)

// echoServer is an API server behind a proxy that answers with a 500 whose
// body echoes the request's Authorization header (as some proxies do), and
// with extra, text it was given. Until broken it answers /version and
// SelfSubjectAccessReviews as a server that allows everything, so that
// Open succeeds and a later request meets the 500.
type echoServer struct {
	*httptest.Server
	extra string

	mu     sync.Mutex // guards the fields below
	broken bool
	auth   []string // the Authorization headers echoed
}

func newEchoServer(t *testing.T, extra string, broken bool) *echoServer {
	t.Helper()
	e := &echoServer{extra: extra, broken: broken}
	e.Server = httptest.NewUnstartedServer(http.HandlerFunc(e.serve))
	e.Config.ErrorLog = log.New(io.Discard, "", 0) // the client's closed connections
	e.StartTLS()
	t.Cleanup(e.Close)
	return e
}

func (e *echoServer) serve(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	broken := e.broken
	if broken || r.URL.Path != "/version" {
		e.auth = append(e.auth, r.Header.Get("Authorization"))
	}
	e.mu.Unlock()
	switch {
	case !broken && r.URL.Path == "/version":
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"major":"1","minor":"37","gitVersion":"v1.37.2"}`)
	case !broken && strings.HasSuffix(r.URL.Path, "/selfsubjectaccessreviews"):
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, `{"apiVersion":"authorization.k8s.io/v1","kind":"SelfSubjectAccessReview","status":{"allowed":true}}`)
	default:
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusInternalServerError)
		fmt.Fprintf(w, "upstream failed; request had Authorization: %s; %s", r.Header.Get("Authorization"), e.extra)
	}
}

// echoed returns the Authorization headers the server echoed.
func (e *echoServer) echoed() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.auth...)
}

// secret returns a random string that names what it is.
func secret(what string) string {
	b := make([]byte, 12)
	rand.Read(b)
	return what + "-" + hex.EncodeToString(b)
}

// clientKeyPair returns a self-signed client certificate and its key, in
// PEM.
func clientKeyPair(t *testing.T) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "leaderrun-test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
}

// writeKubeconfig writes to path a kubeconfig for srv whose user is user
// (YAML, indented under "user:"), and returns path.
func writeKubeconfig(t *testing.T, path string, srv *httptest.Server, user string) string {
	t.Helper()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: user
  user:
%s
contexts:
- name: test
  context:
    cluster: test
    user: user
current-context: test
`, srv.URL, base64.StdEncoding.EncodeToString(ca), user)
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// credentialCase is a kubeconfig user and the secrets that must not show.
type credentialCase struct {
	name    string
	user    string   // the kubeconfig's user, indented
	secrets []string // what no error may show
	extra   string   // what the server echoes besides the header
}

func credentialCases(t *testing.T, dir string) []credentialCase {
	token, fileToken, password, execToken := secret("token"), secret("file-token"), secret("password"), secret("exec-token")
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(fileToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, key := clientKeyPair(t)
	credential := fmt.Sprintf(`{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":%q}}`, execToken)
	indent := func(s string) string { return "    " + strings.ReplaceAll(s, "\n", "\n    ") }
	return []credentialCase{
		{name: "token", user: indent("token: " + token), secrets: []string{token}},
		{name: "token file", user: indent("tokenFile: " + tokenFile), secrets: []string{fileToken}},
		{name: "password", user: indent("username: leaderrun\npassword: " + password),
			secrets: []string{password, base64.StdEncoding.EncodeToString([]byte("leaderrun:" + password))}},
		{name: "client key", user: indent(fmt.Sprintf("client-certificate-data: %s\nclient-key-data: %s",
			base64.StdEncoding.EncodeToString([]byte(cert)), base64.StdEncoding.EncodeToString([]byte(key)))),
			secrets: []string{key}, extra: key},
		{name: "exec plugin", user: indent(fmt.Sprintf(`exec:
  apiVersion: client.authentication.k8s.io/v1
  interactiveMode: Never
  command: /bin/sh
  args: ["-c", %q]`, "printf '%s' '"+credential+"'")), secrets: []string{execToken}},
	}
}

// wantScrubbed fails t when err shows one of secrets, or does not show the
// server's echo at all (then the test proves nothing).
func wantScrubbed(t *testing.T, what string, err error, srv *echoServer, secrets []string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s succeeded against a server that answers 500", what)
	}
	if len(srv.echoed()) == 0 || !strings.Contains(err.Error(), "upstream failed; request had Authorization") {
		t.Fatalf("%s = %v: the server's echo is not in the error; the test proves nothing", what, err)
	}
	for _, s := range secrets {
		// Each line on its own: the error may quote a multi-line secret
		// (a PEM key) with its line breaks escaped.
		for _, line := range strings.Split(s, "\n") {
			if len(line) >= 16 && strings.Contains(err.Error(), line) {
				t.Errorf("%s = %v: it shows the credential %q", what, err, line)
			}
		}
	}
}

// TestErrorsHideCredentials: an API server (or a proxy before it) that
// echoes the request's credentials in an error body gets none of them
// into the store's errors, which leaderrun logs: neither the kubeconfig's
// token, the contents of its token file, its password (as sent, in base
// 64 too), its client key, nor the token its exec plugin gave. It checks
// an error of Open (the first request) and of a request after Open.
func TestErrorsHideCredentials(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range credentialCases(t, dir) {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			srv := newEchoServer(t, tc.extra, true)
			_, err := Open(ctx, "k8s://ns?kubeconfig="+writeKubeconfig(t, filepath.Join(t.TempDir(), "kubeconfig"), srv.Server, tc.user))
			wantScrubbed(t, "Open", err, srv, tc.secrets)

			srv = newEchoServer(t, tc.extra, false)
			s, err := Open(ctx, "k8s://ns?kubeconfig="+writeKubeconfig(t, filepath.Join(t.TempDir(), "kubeconfig"), srv.Server, tc.user))
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			defer s.Close()
			_, err = s.Get(ctx, "n")
			wantScrubbed(t, "Get", err, srv, tc.secrets)
		})
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestWatchErrorsLogNoCredentials: a follower's watch of Leases that the
// server answers with the echo of its credentials is logged by client-go
// (klog, on leaderrun's stderr) without them.
func TestWatchErrorsLogNoCredentials(t *testing.T) {
	var logged syncBuffer
	klog.LogToStderr(false)
	klog.SetOutput(&logged)
	defer func() {
		klog.SetOutput(os.Stderr)
		klog.LogToStderr(true)
	}()
	tc := credentialCases(t, t.TempDir())[0] // the token
	srv := newEchoServer(t, "", false)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := Open(ctx, "k8s://ns?kubeconfig="+writeKubeconfig(t, filepath.Join(t.TempDir(), "kubeconfig"), srv.Server, tc.user))
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer s.Close()
	waited := make(chan error, 1)
	go func() { waited <- s.Wait(ctx, "n", lease.Record{}, time.Minute) }()
	for !strings.Contains(logged.String(), "upstream failed; request had Authorization") {
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			t.Fatalf("client-go logged no failed watch:\n%s", logged.String())
		}
	}
	s.Close()
	<-waited
	wantScrubbed(t, "the log", errors.New(logged.String()), srv, tc.secrets)
}

// TestTokenFileFIFODoesNotHangOpen: the secrets Open collects include the
// token files of the kubeconfig's other users, which client-go never
// reads; one that is a FIFO nobody writes must not hang Open.
func TestTokenFileFIFODoesNotHangOpen(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	srv := newEchoServer(t, "", false)
	user := "    token: " + secret("token") + "\n- name: other\n  user:\n    tokenFile: " + fifo
	kubeconfig := writeKubeconfig(t, filepath.Join(dir, "kubeconfig"), srv.Server, user)
	opened := make(chan error, 1)
	go func() {
		s, err := Open(context.Background(), "k8s://ns?kubeconfig="+kubeconfig)
		if err == nil {
			s.Close()
		}
		opened <- err
	}()
	select {
	case err := <-opened:
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Open hung on another user's token file, a FIFO")
	}
}
