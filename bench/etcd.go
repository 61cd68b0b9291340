package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/bench/internal/mono"
)

// etcdServer is a single-member etcd on loopback with its data in a temp
// dir.
type etcdServer struct {
	p        *proc
	endpoint string // 127.0.0.1:PORT
	client   *http.Client
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (b *bench) startEtcd() (*etcdServer, error) {
	cport, err := freePort()
	if err != nil {
		return nil, err
	}
	pport, err := freePort()
	if err != nil {
		return nil, err
	}
	dataDir, err := os.MkdirTemp(b.tmp, "etcd-data-")
	if err != nil {
		return nil, err
	}
	client := fmt.Sprintf("http://127.0.0.1:%d", cport)
	peer := fmt.Sprintf("http://127.0.0.1:%d", pport)
	argv := []string{b.etcd, "--name", "bench", "--data-dir", dataDir,
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "bench=" + peer, "--initial-cluster-state", "new",
		"--logger", "zap", "--log-level", "warn"}
	p, err := b.procs.start("etcd", argv, nil)
	if err != nil {
		return nil, err
	}
	e := &etcdServer{p: p, endpoint: fmt.Sprintf("127.0.0.1:%d", cport), client: &http.Client{Timeout: 2 * time.Second}}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if p.exited() {
			return nil, fmt.Errorf("etcd exited at start; see %s", filepath.Join(b.procs.logDir, "etcd.log"))
		}
		if _, err := e.count("probe/"); err == nil {
			return e, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.stop()
	return nil, fmt.Errorf("etcd did not answer within 30s")
}

func (e *etcdServer) stop() {
	e.p.killGroup(syscall.SIGTERM)
	if !e.p.wait(10 * time.Second) {
		e.p.killGroup(syscall.SIGKILL)
		e.p.wait(5 * time.Second)
	}
}

// count is the number of keys under prefix, through etcd's JSON gateway.
func (e *etcdServer) count(prefix string) (int, error) {
	end := []byte(prefix)
	end[len(end)-1]++
	body, _ := json.Marshal(map[string]any{
		"key":        base64.StdEncoding.EncodeToString([]byte(prefix)),
		"range_end":  base64.StdEncoding.EncodeToString(end),
		"count_only": true,
	})
	resp, err := e.client.Post("http://"+e.endpoint+"/v3/kv/range", "application/json", bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("etcd range: %s", resp.Status)
	}
	var out struct {
		Count string `json:"count"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return 0, err
	}
	if out.Count == "" {
		return 0, nil
	}
	return strconv.Atoi(out.Count)
}

// etcdTermProbe records what SIGTERM to etcdctl alone (not its group)
// does: whether its child keeps running and whether the lock moves.
type etcdTermProbe struct {
	Ran            bool
	ChildRunning   bool // the holder's child still ran 3s after SIGTERM
	HolderRunning  bool // etcdctl itself still ran then
	LockMoved      bool // another replica's child started within 3s
	ChildRunningAt time.Duration
}

func (b *bench) probeEtcdTerm(e *etcdServer, ttl time.Duration) etcdTermProbe {
	var pr etcdTermProbe
	c := b.etcdContender("etcd-term-probe", e, ttl)
	dir, err := os.MkdirTemp(b.tmp, "etcd-term-probe-")
	if err != nil {
		return pr
	}
	w, err := newWatcher(dir)
	if err != nil {
		return pr
	}
	defer w.close()
	name := fmt.Sprintf("bench-termprobe-%d", os.Getpid())
	h, err := c.spawn(name, dir, 0)
	if err != nil {
		return pr
	}
	defer func() { h.killGroup(syscall.SIGKILL); h.wait(5 * time.Second) }()
	m, ok := w.nextStart(20 * time.Second)
	if !ok {
		return pr
	}
	b.procs.noteChild(m.Pid)
	f, err := c.spawn(name, dir, 1)
	if err != nil {
		return pr
	}
	defer func() { f.killGroup(syscall.SIGKILL); f.wait(5 * time.Second) }()
	if c.standby(name, f, 2, 20*time.Second) != nil {
		return pr
	}
	t0 := mono.Now()
	syscall.Kill(h.pid, syscall.SIGTERM)
	next, moved := w.nextStart(3 * time.Second)
	if moved {
		b.procs.noteChild(next.Pid)
	}
	pr.Ran = true
	pr.LockMoved = moved
	pr.ChildRunning = pidAlive(m.Pid)
	pr.HolderRunning = !h.exited()
	pr.ChildRunningAt = mono.Since(t0)
	return pr
}

// lookPath finds a program on PATH, or "".
func lookPath(name string) string {
	p, err := exec.LookPath(name)
	if err != nil {
		return ""
	}
	return p
}
