// Package etcdtest starts real etcd clusters on loopback for tests: three
// members (or as many as asked) of the etcd binary, each with its own data
// directory, free client and peer ports on 127.0.0.1, a fresh cluster token,
// and timings short enough for tests (heartbeat 100 ms, election timeout
// 600 ms, so that etcd's minimum lease TTL is one second).
//
// The binary is the one in LEADERRUN_TEST_ETCD, by default "etcd" on PATH
// (Debian's etcd-server installs /usr/bin/etcd). When there is none, tests
// skip with a message naming that variable — except in CI (CI set), where
// they fail: CI must not pass by skipping.
//
// A test binary shares one cluster between its tests (Shared), started on
// first use and stopped by Main; tests keep out of each other's way with a
// key prefix each. Tests that kill or restart members start their own
// cluster (Start), stopped when the test ends. Every process started here
// is killed by then, and dies with the test binary if that is killed.
package etcdtest

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// EnvBinary names the variable that points the tests at an etcd binary.
const EnvBinary = "LEADERRUN_TEST_ETCD"

// Timings of the test clusters. etcd raises every lease to at least 1.5
// election timeouts, rounded up to whole seconds: 900 ms makes it 1 s.
const (
	heartbeat       = 100 * time.Millisecond
	electionTimeout = 600 * time.Millisecond
	// startTimeout bounds how long a cluster may take to elect a leader.
	startTimeout = 30 * time.Second
)

// Binary returns the etcd binary to run, and an error that says how to
// point the tests at one when there is none.
func Binary() (string, error) {
	bin := os.Getenv(EnvBinary)
	if bin == "" {
		bin = "etcd"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return "", fmt.Errorf("no etcd binary for tests (%v): install Debian's etcd-server or set %s to the path of an etcd binary", err, EnvBinary)
	}
	return path, nil
}

// Require returns the etcd binary, or skips tb (fails it in CI).
func Require(tb testing.TB) string {
	tb.Helper()
	bin, err := Binary()
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatal(err)
		}
		tb.Skip(err)
	}
	return bin
}

// Options shape a cluster that Start starts.
type Options struct {
	// Members is the number of members; 0 means 3.
	Members int
	// CertFile and KeyFile, when set, make the members serve clients over
	// TLS (https client URLs) with this certificate and key; ClientCA,
	// when set, also makes them require client certificates signed by it.
	CertFile, KeyFile, ClientCA string
	// ClientTLS is what this package's own clients of a TLS cluster use.
	ClientTLS *tls.Config
}

// Cluster is a running etcd cluster on loopback.
type Cluster struct {
	bin     string
	dir     string
	scheme  string      // of client URLs: http or https
	tls     *tls.Config // of this package's own clients; nil for http
	members []*Member
}

// Member is one etcd process of a Cluster.
type Member struct {
	Name string
	// ClientAddr is the member's client address, host:port.
	ClientAddr string
	peerAddr   string
	dataDir    string
	logPath    string
	args       []string
	bin        string

	mu     sync.Mutex // guards cmd and exited
	cmd    *exec.Cmd
	exited chan struct{} // closed when cmd has been reaped
}

// Start starts a cluster of its own for tb and stops it when tb ends.
func Start(tb testing.TB, opts Options) *Cluster {
	tb.Helper()
	bin := Require(tb)
	c, err := start(bin, tb.TempDir(), opts)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(c.Stop)
	return c
}

// startAttempts is how often start tries fresh ports when a member could
// not bind the ones it was given (another process took them in between).
const startAttempts = 3

func start(bin, dir string, opts Options) (*Cluster, error) {
	var err error
	for attempt := range startAttempts {
		var c *Cluster
		c, err = startOnce(bin, filepath.Join(dir, fmt.Sprintf("try%d", attempt)), opts)
		if err == nil {
			return c, nil
		}
	}
	return nil, err
}

func startOnce(bin, dir string, opts Options) (*Cluster, error) {
	n := opts.Members
	if n == 0 {
		n = 3
	}
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin, dir: dir, scheme: "http", tls: opts.ClientTLS}
	if opts.CertFile != "" {
		c.scheme = "https"
	}
	var initial []string
	for i := range n {
		m := &Member{
			Name:       fmt.Sprintf("m%d", i),
			ClientAddr: ports[2*i],
			peerAddr:   ports[2*i+1],
			bin:        bin,
		}
		m.dataDir = filepath.Join(dir, m.Name)
		m.logPath = filepath.Join(dir, m.Name+".log")
		c.members = append(c.members, m)
		initial = append(initial, m.Name+"=http://"+m.peerAddr)
	}
	token := "leaderrun-test-" + randomHex(8)
	for _, m := range c.members {
		clientURL := c.scheme + "://" + m.ClientAddr
		m.args = []string{
			"--name", m.Name,
			"--data-dir", m.dataDir,
			"--listen-client-urls", clientURL,
			"--advertise-client-urls", clientURL,
			"--listen-peer-urls", "http://" + m.peerAddr,
			"--initial-advertise-peer-urls", "http://" + m.peerAddr,
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-state", "new",
			"--initial-cluster-token", token,
			"--heartbeat-interval", fmt.Sprint(heartbeat.Milliseconds()),
			"--election-timeout", fmt.Sprint(electionTimeout.Milliseconds()),
			"--pre-vote",
			"--logger", "zap",
			"--log-level", "warn",
		}
		if opts.CertFile != "" {
			m.args = append(m.args, "--cert-file", opts.CertFile, "--key-file", opts.KeyFile)
			if opts.ClientCA != "" {
				m.args = append(m.args, "--trusted-ca-file", opts.ClientCA, "--client-cert-auth")
			}
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	for _, m := range c.members {
		if err := m.Start(); err != nil {
			c.Stop()
			return nil, err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	if err := c.WaitHealthy(ctx); err != nil {
		c.Stop()
		return nil, fmt.Errorf("etcd cluster in %s did not become healthy: %w%s", dir, err, c.logTails())
	}
	return c, nil
}

// Endpoints lists the members' client addresses, host:port.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.members))
	for i, m := range c.members {
		eps[i] = m.ClientAddr
	}
	return eps
}

// Members returns the cluster's members, in the order they were created.
func (c *Cluster) Members() []*Member { return c.members }

// Member returns member i.
func (c *Cluster) Member(i int) *Member { return c.members[i] }

// Stop kills every member. It is safe to call more than once.
func (c *Cluster) Stop() {
	for _, m := range c.members {
		m.Kill()
	}
}

// Client returns a client of the whole cluster for tb's own use (setting up
// state, compacting, checking), closed when tb ends.
func (c *Cluster) Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	cli, err := c.newClient(c.Endpoints()...)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { cli.Close() })
	return cli
}

func (c *Cluster) newClient(eps ...string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   eps,
		DialTimeout: 5 * time.Second,
		TLS:         c.tls,
		Logger:      zap.NewNop(),
	})
}

// Leader returns the index of the member that is etcd's leader now, as
// the live members report it; it fails unless they agree.
func (c *Cluster) Leader(ctx context.Context) (int, error) {
	ids := map[uint64]int{}
	var leader uint64
	for i, m := range c.members {
		if !m.Running() {
			continue
		}
		st, err := c.status(ctx, m)
		if err != nil {
			return -1, fmt.Errorf("status of %s: %w", m.Name, err)
		}
		ids[st.Header.MemberId] = i
		switch {
		case st.Leader == 0:
			return -1, fmt.Errorf("%s has no leader", m.Name)
		case leader == 0:
			leader = st.Leader
		case st.Leader != leader:
			return -1, fmt.Errorf("members disagree on the leader (%x, %x)", leader, st.Leader)
		}
	}
	i, ok := ids[leader]
	if !ok {
		return -1, fmt.Errorf("leader %x is not a live member", leader)
	}
	return i, nil
}

func (c *Cluster) status(ctx context.Context, m *Member) (*clientv3.StatusResponse, error) {
	cli, err := c.newClient(m.ClientAddr)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return cli.Status(sctx, m.ClientAddr)
}

// WaitHealthy returns once every running member reports the same leader
// and a linearizable read through every one of them succeeds, or with the
// last error when ctx ends first. It polls: etcd has no readiness signal
// to wait on.
func (c *Cluster) WaitHealthy(ctx context.Context) error {
	poll := 20 * time.Millisecond
	for {
		err := c.healthy(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(poll):
			poll = min(2*poll, 250*time.Millisecond)
		}
	}
}

func (c *Cluster) healthy(ctx context.Context) error {
	if _, err := c.Leader(ctx); err != nil {
		return err
	}
	for _, m := range c.members {
		if !m.Running() {
			continue
		}
		cli, err := c.newClient(m.ClientAddr)
		if err != nil {
			return err
		}
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err = cli.Get(rctx, "health")
		cancel()
		cli.Close()
		if err != nil {
			return fmt.Errorf("read through %s: %w", m.Name, err)
		}
	}
	return nil
}

// Start starts the member's process, with its data directory as it is.
func (m *Member) Start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd != nil {
		return fmt.Errorf("etcd member %s is already running", m.Name)
	}
	logf, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(m.bin, m.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start etcd member %s: %w", m.Name, err)
	}
	exited := make(chan struct{})
	go func() {
		cmd.Wait()
		close(exited)
	}()
	m.cmd, m.exited = cmd, exited
	return nil
}

// Running reports whether the member's process was started and has not
// been killed.
func (m *Member) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cmd == nil {
		return false
	}
	select {
	case <-m.exited:
		return false
	default:
		return true
	}
}

// Kill kills the member's process with SIGKILL and waits until it is
// reaped. Its data directory stays, for Restart.
func (m *Member) Kill() {
	m.mu.Lock()
	cmd, exited := m.cmd, m.exited
	m.cmd, m.exited = nil, nil
	m.mu.Unlock()
	if cmd == nil {
		return
	}
	cmd.Process.Kill()
	<-exited
}

// Restart kills the member if it runs and starts it again with its data.
func (m *Member) Restart() error {
	m.Kill()
	return m.Start()
}

// Log returns what the member's processes wrote so far.
func (m *Member) Log() string {
	b, _ := os.ReadFile(m.logPath)
	return string(b)
}

func (c *Cluster) logTails() string {
	var b strings.Builder
	for _, m := range c.members {
		log := m.Log()
		if len(log) > 2000 {
			log = "…" + log[len(log)-2000:]
		}
		fmt.Fprintf(&b, "\n--- %s log:\n%s", m.Name, log)
	}
	return b.String()
}

// freePorts returns n distinct loopback addresses whose ports were free a
// moment ago.
func freePorts(n int) ([]string, error) {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	addrs := make([]string, n)
	for i := range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		lns = append(lns, ln)
		addrs[i] = ln.Addr().String()
	}
	return addrs, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// RandomPrefix returns a key prefix no other test run uses.
func RandomPrefix() string { return "lrtest-" + randomHex(6) }

var shared struct {
	mu      sync.Mutex // guards the fields below
	main    bool       // Main is running the tests
	dir     string
	cluster *Cluster
	err     error
}

// Main runs a test binary's tests (call it from TestMain) and then stops
// the cluster that Shared started, if any.
func Main(m *testing.M) int {
	shared.mu.Lock()
	shared.main = true
	shared.mu.Unlock()
	code := m.Run()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.cluster != nil {
		shared.cluster.Stop()
	}
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	return code
}

// Shared returns the cluster that the test binary's tests share, starting
// it on first use. It needs Main in TestMain, which stops it.
func Shared(tb testing.TB) *Cluster {
	tb.Helper()
	bin := Require(tb)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.main {
		tb.Fatal("etcdtest.Shared needs etcdtest.Main in the package's TestMain")
	}
	if shared.cluster == nil && shared.err == nil {
		shared.dir, shared.err = os.MkdirTemp("", "leaderrun-etcd-")
		if shared.err == nil {
			shared.cluster, shared.err = start(bin, shared.dir, Options{})
		}
	}
	if shared.err != nil {
		tb.Fatal(shared.err)
	}
	return shared.cluster
}
