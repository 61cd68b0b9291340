// Package kubetest starts a real Kubernetes API server on loopback for
// tests: an etcd of its own (Debian's etcd-server, or LEADERRUN_TEST_ETCD)
// and kube-apiserver built from the k8s.io modules by the tool module in
// internal/testenv/kubeapiserver, with static bearer tokens and RBAC. No kubelet or
// controller runs: objects are stored and served, pods never start.
//
// The API server is built once per machine into the Go build cache
// (Binary); its first build takes minutes. A test binary shares one server
// between its tests (Shared, with Main in TestMain); tests keep apart with
// a namespace each. When etcd is missing, or the server cannot be built,
// tests skip with a message, except in CI, where they fail (and with
// EnvSkip set, they skip: make test leaves them to make test-kube); a server that
// was there but did not start fails them everywhere, at once when its
// process exits, with its output. A test may crash the API server or its
// etcd (Kill) and start it again (Restart), at the same address.
package kubetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/testenv/citest"
	"github.com/leaderrun/leaderrun/internal/testenv/etcdtest"
)

// Version is the Kubernetes release the tests run.
const Version = "v1.37.2"

// EnvBinary names a variable that points the tests at a kube-apiserver
// binary instead of the one built into the Go build cache.
const EnvBinary = "LEADERRUN_TEST_KUBE_APISERVER"

// EnvRequire names a variable that, set to anything, makes a missing
// server fail the tests instead of skipping them, as CI does (make
// test-kube sets it).
const EnvRequire = "LEADERRUN_TEST_KUBE_REQUIRED"

// EnvSkip names a variable that, set to anything, makes every test that
// needs the server skip, whether it is there or not: make test sets it,
// and leaves those tests to make test-kube.
const EnvSkip = "LEADERRUN_TEST_KUBE_SKIP"

// AdminToken is the bearer token of a user in group system:masters.
const AdminToken = "leaderrun-test-admin"

// Users are static users without any permission but what a test grants
// them with RBAC: name → bearer token.
var Users = map[string]string{
	"alice": "leaderrun-test-alice",
	"bob":   "leaderrun-test-bob",
}

// readyTimeout bounds the server's start (etcd and /readyz).
const readyTimeout = 3 * time.Minute

var buildMu sync.Mutex // serialises builds within a process

// Binary returns the kube-apiserver to run, building it into the Go build
// cache (GOCACHE/leaderrun/kube-apiserver-VERSION) if it is not there.
func Binary() (string, error) {
	if bin := os.Getenv(EnvBinary); bin != "" {
		return bin, nil
	}
	out, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOCACHE: %w", err)
	}
	bin := filepath.Join(strings.TrimSpace(string(out)), "leaderrun", "kube-apiserver-"+Version)
	buildMu.Lock()
	defer buildMu.Unlock()
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	_, self, _, _ := runtime.Caller(0)
	src := filepath.Join(filepath.Dir(self), "..", "kubeapiserver")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", err
	}
	tmp := fmt.Sprintf("%s.%d.tmp", bin, os.Getpid())
	cmd := exec.Command("nice", "-n", "10", "go", "build", "-o", tmp, ".")
	cmd.Dir = src
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("build kube-apiserver in %s: %v\n%s", src, err, out)
	}
	return bin, os.Rename(tmp, bin)
}

// Server is a running API server and its etcd.
type Server struct {
	// URL is the server's https://127.0.0.1:PORT.
	URL string
	dir string

	mu    sync.Mutex // guards procs
	procs []*process // etcd, then the API server
}

// Process names one of a Server's processes, for Kill and Restart.
type Process string

// A Server's processes.
const (
	Etcd      Process = "etcd"
	APIServer Process = "kube-apiserver"
)

// process is one of the server's processes, as it was started (so that it
// can be started again) and as it runs.
type process struct {
	name Process
	bin  string
	args []string

	cmd  *exec.Cmd
	done chan struct{} // closed once cmd exited
	err  error         // cmd.Wait's result; set before done closes
}

// exited reports whether p's current run ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// missingError is a start that failed because etcd or the API server's
// binary is not there: tests skip (fail in CI). Any other failure to start
// fails them.
type missingError struct{ err error }

func (e *missingError) Error() string { return e.err.Error() }
func (e *missingError) Unwrap() error { return e.err }

// Start starts a server of its own for tb, stopped when tb ends. Its
// ports are found free before its processes bind them, and another
// process may take one in between (CI once saw the API server's taken by
// a test beside it): a start that fails so is tried again on new ports,
// startTries times in all.
func Start(tb testing.TB) *Server {
	tb.Helper()
	skipped(tb)
	var s *Server
	var err error
	for range startTries {
		s, err = start(tb.TempDir())
		if err == nil || !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	failed(tb, err)
	tb.Cleanup(s.Stop)
	return s
}

// startTries is how many times Start tries to start a server whose port
// was taken.
const startTries = 3

// skipped skips tb when EnvSkip is set.
func skipped(tb testing.TB) {
	tb.Helper()
	if os.Getenv(EnvSkip) != "" {
		tb.Skipf("needs the Kubernetes API server: %s is set (make test leaves these tests to make test-kube)", EnvSkip)
	}
}

// failed skips tb (fails it in CI) when err says the server is missing,
// and fails it for any other error.
func failed(tb testing.TB, err error) {
	tb.Helper()
	var missing *missingError
	switch {
	case errors.As(err, &missing) && os.Getenv(EnvRequire) != "":
		tb.Fatalf("kube-apiserver: %v (%s is set: the tests must run, not skip)", err, EnvRequire)
	case errors.As(err, &missing):
		citest.Missing(tb, "kube-apiserver: %v", err)
	case err != nil:
		tb.Fatalf("kube-apiserver: %v", err)
	}
}

func start(dir string) (*Server, error) {
	etcdBin, err := etcdtest.Binary()
	if err != nil {
		return nil, &missingError{err}
	}
	apiBin, err := Binary()
	if err != nil {
		return nil, &missingError{err}
	}
	s := &Server{dir: dir}
	if err := s.files(); err != nil {
		return nil, err
	}
	ports := make([]int, 3)
	for i := range ports {
		if ports[i], err = citest.FreePort(); err != nil {
			return nil, err
		}
	}
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	err = s.spawn(Etcd, etcdBin,
		"--name=kubetest", "--data-dir="+filepath.Join(dir, "etcd"),
		"--listen-client-urls="+etcdURL, "--advertise-client-urls="+etcdURL,
		fmt.Sprintf("--listen-peer-urls=http://127.0.0.1:%d", ports[1]),
		fmt.Sprintf("--initial-advertise-peer-urls=http://127.0.0.1:%d", ports[1]),
		fmt.Sprintf("--initial-cluster=kubetest=http://127.0.0.1:%d", ports[1]),
		"--initial-cluster-token=kubetest-"+randomHex(4))
	if err != nil {
		return nil, err
	}
	s.URL = fmt.Sprintf("https://127.0.0.1:%d", ports[2])
	key := filepath.Join(dir, "sa.key")
	err = s.spawn(APIServer, apiBin,
		"--etcd-servers="+etcdURL,
		"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		fmt.Sprintf("--secure-port=%d", ports[2]),
		"--cert-dir="+filepath.Join(dir, "certs"),
		"--token-auth-file="+filepath.Join(dir, "tokens.csv"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file="+key, "--service-account-signing-key-file="+key,
		"--service-cluster-ip-range=10.96.0.0/24",
		// The default reconciler (lease) keeps the kubernetes Service's
		// endpoints; without a controller manager it made the server
		// exit at start.
		"--endpoint-reconciler-type=none",
		"--enable-priority-and-fairness=false",
		"--profiling=false")
	if err != nil {
		s.Stop()
		return nil, err
	}
	if err := s.waitReady(250 * time.Millisecond); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

// files writes the token file and the service-account signing key.
func (s *Server) files() error {
	var tokens strings.Builder
	fmt.Fprintf(&tokens, "%s,admin,admin,\"system:masters\"\n", AdminToken)
	for user, token := range Users {
		fmt.Fprintf(&tokens, "%s,%s,%s\n", token, user, user)
	}
	if err := os.WriteFile(filepath.Join(s.dir, "tokens.csv"), []byte(tokens.String()), 0o600); err != nil {
		return err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	return os.WriteFile(filepath.Join(s.dir, "sa.key"), pemKey, 0o600)
}

// spawn starts the process name, logging to name.log in the server's
// directory.
func (s *Server) spawn(name Process, bin string, args ...string) error {
	p := &process{name: name, bin: bin, args: args}
	if err := s.run(p); err != nil {
		return err
	}
	s.mu.Lock()
	s.procs = append(s.procs, p)
	s.mu.Unlock()
	return nil
}

// run starts p, appending to its log.
func (s *Server) run(p *process) error {
	log, err := os.OpenFile(filepath.Join(s.dir, string(p.name)+".log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	s.mu.Lock()
	p.cmd, p.done, p.err = cmd, done, nil
	s.mu.Unlock()
	go func() {
		err := cmd.Wait()
		p.err = err
		close(done)
	}()
	return nil
}

// proc returns the process name.
func (s *Server) proc(name Process) *process {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.procs {
		if p.name == name {
			return p
		}
	}
	return nil
}

// Kill SIGKILLs the process name (its process group) and waits until it
// exited: a crash of the API server or of its etcd. Restart starts it
// again.
func (s *Server) Kill(name Process) error {
	p := s.proc(name)
	if p == nil || p.cmd == nil {
		return fmt.Errorf("kill %s: not started", name)
	}
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.done:
		return nil
	case <-time.After(30 * time.Second):
		return fmt.Errorf("kill %s: pid %d did not exit within 30s of SIGKILL", name, p.cmd.Process.Pid)
	}
}

// Restart starts the process name again after Kill, with the flags, data
// and port it had, and waits until the API server serves a read of an
// object again: clients' requests succeed from then on, while /readyz
// may still wait for the server's start hooks (or, after a restart of
// etcd alone, not wait for etcd at all). The URL stays the same.
func (s *Server) Restart(name Process) error {
	p := s.proc(name)
	if p == nil {
		return fmt.Errorf("restart %s: not started", name)
	}
	if exited, _ := p.exited(); !exited {
		return fmt.Errorf("restart %s: it is running (Kill it first)", name)
	}
	if log, err := os.OpenFile(filepath.Join(s.dir, string(name)+".log"), os.O_WRONLY|os.O_APPEND, 0); err == nil {
		fmt.Fprintf(log, "--- kubetest: restarted at %s ---\n", time.Now().Format(time.RFC3339Nano))
		log.Close()
	}
	if err := s.run(p); err != nil {
		return err
	}
	// Polled often: the time it answers is when a fault healed.
	return s.wait(readPath, 10*time.Millisecond)
}

// readPath is what waitReady reads once /readyz answers: an object that
// start's bootstrap creates.
const readPath = "/api/v1/namespaces/kube-system"

// waitReady polls /readyz, every poll, until it answers 200, and then
// readPath until that answers 200.
func (s *Server) waitReady(poll time.Duration) error { return s.wait("/readyz", poll) }

// wait polls path, every poll, until it answers 200, and then readPath
// until that answers 200. It gives up at once when etcd or the API server
// exits.
func (s *Server) wait(path string, poll time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	var last string
	for ctx.Err() == nil {
		s.mu.Lock()
		procs := slices.Clone(s.procs)
		s.mu.Unlock()
		for _, p := range procs {
			if exited, err := p.exited(); exited {
				return fmt.Errorf("%s exited before /readyz answered (%v); its log:\n%s", p.name, err, s.logOf(p.name))
			}
		}
		// A short timeout per request: an exit is noticed between them.
		rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
		req, _ := http.NewRequestWithContext(rctx, "GET", s.URL+path, nil)
		req.Header.Set("Authorization", "Bearer "+AdminToken)
		resp, err := insecureClient.Do(req)
		rcancel()
		if err == nil {
			resp.Body.Close()
			switch {
			case resp.StatusCode == http.StatusOK && path == readPath:
				return nil
			case resp.StatusCode == http.StatusOK:
				path = readPath
				continue
			}
			last = path + ": " + resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(poll)
	}
	return fmt.Errorf("kube-apiserver not ready within %v (last: %s); its log:\n%s", readyTimeout, last, s.Log())
}

// Log returns the tail of the API server's log.
func (s *Server) Log() string { return s.logOf(APIServer) }

// logOf returns the tail of the log of the process name.
func (s *Server) logOf(name Process) string {
	b, _ := os.ReadFile(filepath.Join(s.dir, string(name)+".log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Stop kills the API server and etcd. It is safe to call more than once.
func (s *Server) Stop() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.procs) - 1; i >= 0; i-- {
		if p := s.procs[i]; p.cmd != nil {
			syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		}
	}
	s.procs = nil
}

// Addr is the API server's host:port, for a proxy in front of it
// (WriteKubeconfigVia).
func (s *Server) Addr() string { return strings.TrimPrefix(s.URL, "https://") }

// Kubeconfig writes a kubeconfig for the user whose bearer token is token
// (the server's certificate is not verified: it is made up at start) and
// returns its path. Namespace, when set, is the context's.
func (s *Server) Kubeconfig(tb testing.TB, token, namespace string) string {
	tb.Helper()
	path := filepath.Join(tb.TempDir(), "kubeconfig")
	if err := s.WriteKubeconfig(path, token, namespace); err != nil {
		tb.Fatal(err)
	}
	return path
}

// WriteKubeconfig writes to path the kubeconfig that Kubeconfig returns.
func (s *Server) WriteKubeconfig(path, token, namespace string) error {
	return writeKubeconfig(path, s.URL, token, namespace)
}

// WriteKubeconfigVia writes to path a kubeconfig that reaches the server
// at addr (host:port: a proxy in front of Addr) instead of at URL.
func (s *Server) WriteKubeconfigVia(path, addr, token, namespace string) error {
	return writeKubeconfig(path, "https://"+addr, token, namespace)
}

func writeKubeconfig(path, server, token, namespace string) error {
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: user
  user:
    token: %s
contexts:
- name: test
  context:
    cluster: test
    user: user
    namespace: %q
current-context: test
`, server, token, namespace)
	return os.WriteFile(path, []byte(cfg), 0o600)
}

// insecureClient is an HTTP client for the server, whose certificate is
// made up at start.
var insecureClient = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
}}

// CreateNamespace creates a namespace of a random name, lrtest-…, as the
// admin, and returns its name. Nothing removes it: the server's etcd is
// the test's.
func (s *Server) CreateNamespace(ctx context.Context) (string, error) {
	ns := "lrtest-" + randomHex(4)
	body := fmt.Sprintf(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":%q}}`, ns)
	req, err := http.NewRequestWithContext(ctx, "POST", s.URL+"/api/v1/namespaces", strings.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+AdminToken)
	req.Header.Set("Content-Type", "application/json")
	resp, err := insecureClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("create namespace %s: %w", ns, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return "", fmt.Errorf("create namespace %s: %s: %s", ns, resp.Status, b)
	}
	return ns, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

var shared struct {
	mu     sync.Mutex // guards the fields below
	main   bool
	dir    string
	server *Server
	err    error
}

// Main runs a test binary's tests (call it from TestMain) and then stops
// the server that Shared started, if any.
func Main(m *testing.M) int {
	shared.mu.Lock()
	shared.main = true
	shared.mu.Unlock()
	code := m.Run()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.server != nil {
		shared.server.Stop()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	return code
}

// Shared returns the server the test binary's tests share, starting it on
// first use; it skips tb (fails it in CI) when there can be none, and
// fails it when the server did not start.
func Shared(tb testing.TB) *Server {
	tb.Helper()
	skipped(tb)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.main {
		tb.Fatal("kubetest.Shared needs kubetest.Main in the package's TestMain")
	}
	if shared.server == nil && shared.err == nil {
		shared.dir, shared.err = os.MkdirTemp("", "leaderrun-kube-")
		if shared.err == nil {
			shared.server, shared.err = start(shared.dir)
		}
	}
	failed(tb, shared.err)
	return shared.server
}

// Admin sends a request to path as the admin, with body as JSON (none
// when nil), and returns the answer's body; a status other than 2xx is an
// error that names it.
func (s *Server) Admin(ctx context.Context, method, path string, body any) ([]byte, error) {
	return s.Request(ctx, AdminToken, method, path, body)
}

// Request is Admin as the user whose bearer token is token.
func (s *Server) Request(ctx context.Context, token, method, path string, body any) ([]byte, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.URL+path, r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if method == "PATCH" {
		req.Header.Set("Content-Type", "application/merge-patch+json")
	}
	resp, err := insecureClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, b)
	}
	return b, nil
}

// CreatePod creates the Pod object name in namespace ns, with labels, as
// a Deployment's ReplicaSet would; no kubelet runs it. The namespace's
// default ServiceAccount, which the pod's admission needs and no
// controller makes here, is created first if it is missing.
func (s *Server) CreatePod(ctx context.Context, ns, name string, labels map[string]string) error {
	sa := map[string]any{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": map[string]any{"name": "default"}}
	if _, err := s.Admin(ctx, "POST", "/api/v1/namespaces/"+ns+"/serviceaccounts", sa); err != nil && !strings.Contains(err.Error(), "409 Conflict") {
		return err
	}
	pod := map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "labels": labels},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "app", "image": "app"}}},
	}
	_, err := s.Admin(ctx, "POST", "/api/v1/namespaces/"+ns+"/pods", pod)
	return err
}

// Labelled returns the names of the pods of namespace ns that the label
// selector selects (KEY=VALUE), sorted.
func (s *Server) Labelled(ctx context.Context, ns, selector string) ([]string, error) {
	b, err := s.Admin(ctx, "GET", "/api/v1/namespaces/"+ns+"/pods?labelSelector="+url.QueryEscape(selector), nil)
	if err != nil {
		return nil, err
	}
	var list struct {
		Items []struct {
			Metadata struct{ Name string }
		}
	}
	if err := json.Unmarshal(b, &list); err != nil {
		return nil, err
	}
	var names []string
	for _, p := range list.Items {
		names = append(names, p.Metadata.Name)
	}
	slices.Sort(names)
	return names, nil
}

// Rule is a rule of a Role: verbs on resources of API groups ("" is the
// core group).
type Rule struct {
	APIGroups, Resources, Verbs []string
}

// LeaseRule is what the Kubernetes store needs (lease/kubernetes.Verbs).
var LeaseRule = Rule{[]string{"coordination.k8s.io"}, []string{"leases"}, []string{"get", "list", "watch", "create", "update"}}

// Grant gives the user (one of Users, or system:serviceaccount:NS:NAME)
// the rules in namespace ns: a Role and a RoleBinding named name.
func (s *Server) Grant(ctx context.Context, ns, name, user string, rules ...Rule) error {
	var rs []any
	for _, r := range rules {
		rs = append(rs, map[string]any{"apiGroups": r.APIGroups, "resources": r.Resources, "verbs": r.Verbs})
	}
	role := map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
		"metadata": map[string]any{"name": name}, "rules": rs}
	if _, err := s.Admin(ctx, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/"+ns+"/roles", role); err != nil {
		return err
	}
	subject := map[string]any{"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": user}
	if rest, ok := strings.CutPrefix(user, "system:serviceaccount:"); ok {
		sans, saName, _ := strings.Cut(rest, ":")
		subject = map[string]any{"kind": "ServiceAccount", "name": saName, "namespace": sans}
	}
	binding := map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
		"metadata": map[string]any{"name": name},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
		"subjects": []any{subject}}
	_, err := s.Admin(ctx, "POST", "/apis/rbac.authorization.k8s.io/v1/namespaces/"+ns+"/rolebindings", binding)
	return err
}

// AwaitLabelled waits until the pods of namespace ns that the label
// selector selects are want (sorted), failing tb after waitLimit.
func (s *Server) AwaitLabelled(tb testing.TB, ns, selector string, want ...string) {
	tb.Helper()
	var got []string
	var err error
	for deadline := time.Now().Add(awaitLimit); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(context.Background(), awaitLimit)
		got, err = s.Labelled(ctx, ns, selector)
		cancel()
		if err == nil && slices.Equal(got, want) {
			return
		}
	}
	tb.Fatalf("pods labelled %s in %s: %q (%v), want %q", selector, ns, got, err, want)
}

// awaitLimit bounds AwaitLabelled: generous, never a timing assertion.
const awaitLimit = 30 * time.Second

// ServiceAccountToken asks the server for a token of the ServiceAccount
// name in namespace ns, as the kubelet does for a pod.
func (s *Server) ServiceAccountToken(ctx context.Context, ns, name string) (string, error) {
	req := map[string]any{"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": map[string]any{}}
	b, err := s.Admin(ctx, "POST", "/api/v1/namespaces/"+ns+"/serviceaccounts/"+name+"/token", req)
	if err != nil {
		return "", err
	}
	var tr struct{ Status struct{ Token string } }
	if err := json.Unmarshal(b, &tr); err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// CACert returns the PEM certificates that verify the server's (it makes
// its own at start, for 127.0.0.1 and kubernetes.default.svc), as a pod's
// service account's ca.crt holds them.
func (s *Server) CACert() ([]byte, error) {
	return os.ReadFile(filepath.Join(s.dir, "certs", "apiserver.crt"))
}

// Port is the port the server listens on.
func (s *Server) Port() string {
	_, port, _ := strings.Cut(s.Addr(), ":")
	return port
}
