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
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/lab/bench/internal/mono"
)

// etcdServer is a three-member etcd cluster on loopback with its data in
// a temp dir: the cluster on which both etcdctl lock and leaderrun's etcd
// store are measured.
type etcdServer struct {
	members   []*proc
	endpoints []string // 127.0.0.1:PORT of every member
	endpoint  string   // the first member's, for the benchmark's own reads
	client    *http.Client
}

// etcdMembers is the size of the benchmark's etcd cluster.
const etcdMembers = 3

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	givenPorts.Lock()
	defer givenPorts.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		l.Close()
		// The port is bound only later, by the process it is for: never
		// hand it out twice (two groups starting at once got the same one,
		// and one group's replica was scraped at the other's /metrics).
		if !givenPorts.m[port] {
			givenPorts.m[port] = true
			return port, nil
		}
	}
}

// givenPorts are the ports freePort has handed out in this run.
var givenPorts = struct {
	sync.Mutex
	m map[int]bool
}{m: map[int]bool{}}

func (b *bench) startEtcd() (*etcdServer, error) {
	var cports, pports []int
	for range etcdMembers {
		cp, err := freePort()
		if err != nil {
			return nil, err
		}
		pp, err := freePort()
		if err != nil {
			return nil, err
		}
		cports, pports = append(cports, cp), append(pports, pp)
	}
	var initial []string
	for i, pp := range pports {
		initial = append(initial, fmt.Sprintf("m%d=http://127.0.0.1:%d", i, pp))
	}
	e := &etcdServer{client: &http.Client{Timeout: 2 * time.Second}}
	for i := range etcdMembers {
		dataDir, err := os.MkdirTemp(b.tmp, fmt.Sprintf("etcd-m%d-", i))
		if err != nil {
			e.stop()
			return nil, err
		}
		client := fmt.Sprintf("http://127.0.0.1:%d", cports[i])
		peer := fmt.Sprintf("http://127.0.0.1:%d", pports[i])
		argv := []string{b.etcd, "--name", fmt.Sprintf("m%d", i), "--data-dir", dataDir,
			"--listen-client-urls", client, "--advertise-client-urls", client,
			"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", fmt.Sprintf("lrbench-%d", os.Getpid()),
			"--logger", "zap", "--log-level", "warn"}
		p, err := b.procs.start(fmt.Sprintf("etcd-m%d", i), argv, nil)
		if err != nil {
			e.stop()
			return nil, err
		}
		e.members = append(e.members, p)
		e.endpoints = append(e.endpoints, fmt.Sprintf("127.0.0.1:%d", cports[i]))
	}
	e.endpoint = e.endpoints[0]
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, p := range e.members {
			if p.exited() {
				e.stop()
				return nil, fmt.Errorf("etcd member exited at start; see %s", filepath.Join(b.procs.logDir, p.label+".log"))
			}
		}
		if _, err := e.count("probe/"); err == nil {
			return e, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.stop()
	return nil, fmt.Errorf("etcd did not answer within 30s")
}

// stop stops every member at once (a leader stopped alone waits for
// peers that are gone).
func (e *etcdServer) stop() { stopAll(e.members, 10*time.Second) }

// endpointList is the members' addresses, comma-separated, as etcdctl's
// --endpoints and an etcd:// DSN take them.
func (e *etcdServer) endpointList() string { return strings.Join(e.endpoints, ",") }

// dsn is the etcd:// store DSN of the whole cluster with a key prefix.
func (e *etcdServer) dsn(prefix string) string {
	return "etcd://" + e.endpointList() + "/" + prefix
}

// requests sums, over every member, the gRPC messages the member received
// from clients (grpc_server_msg_received_total: one per unary call, one
// per message on a stream such as a lease keep-alive or a watch), by
// method. Peers talk to each other over HTTP, not gRPC, so raft traffic is
// not in it.
func (e *etcdServer) requests() (map[string]float64, error) {
	out := map[string]float64{}
	for _, ep := range e.endpoints {
		resp, err := e.client.Get("http://" + ep + "/metrics")
		if err != nil {
			return nil, err
		}
		ms, err := parseMetrics(resp.Body)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		for _, m := range ms {
			if m.name == "grpc_server_msg_received_total" {
				out[m.labels["grpc_method"]] += m.value
			}
		}
	}
	return out, nil
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
	b.procs.noteChild(hostPid(m))
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
		b.procs.noteChild(hostPid(next))
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
