package chaos

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/testenv/etcdtest"
	"github.com/leaderrun/leaderrun/internal/testenv/tcpproxy"
)

// replicaCount is how many leaderrun replicas campaign for the name.
const replicaCount = 3

// cluster is one store's replicas, their proxies (networked stores) and
// the event log of their children.
type cluster struct {
	t     *testing.T
	store string // one of storeKinds
	dir   string
	bin   string // leaderrun
	self  string // this test binary, the recording child
	env   []string
	// partitions is the replicas' --partitions; 0 for one name.
	partitions int

	dsn     func(idx int) string // replica idx's --store
	proxies [][]*tcpproxy.Proxy  // per replica, one per server; nil on SQLite
	fence   writesTable          // the children's fenced writes; nil where the store has no fence
	// killSessions ends replica idx's sessions from the server's side and
	// says how many it ended; nil where the store cannot.
	killSessions func(idx int) (int, error)
	etcd         *etcdtest.Cluster // the run's own; nil but on etcd
	// injectors inject the faults of a tagged store's server, by kind;
	// its setup sets them. Each sets the fault's at and healAt, or its
	// note to "nothing" when it injected nothing.
	injectors map[string]func(f *fault, rng *rand.Rand)

	timing timing
	log    *eventLog
	// stopAt is when the driver began stopping the replicas at the end.
	stopAt time.Time

	reps []*replica // the current generation of each replica
	all  []*replica // every generation ever started
	gens int
}

// timing is the replicas' timing model.
type timing struct {
	ttl, grace, deadline, interval time.Duration
	// reconcile is the partitioned replicas' --reconcile-interval; 0 for
	// one name.
	reconcile time.Duration
}

// reconcileInterval is the partitioned replicas' --reconcile-interval: a
// partition whose owner died is taken over within the TTL plus this.
const reconcileInterval = time.Second

// readTiming takes the timing a replica logged on its "starting" line;
// durations are logged as text
// (the derived renew deadline and interval included); it waits up to d.
func readTiming(logPath string, d time.Duration) (timing, error) {
	deadline := time.Now().Add(d)
	for {
		data, _ := os.ReadFile(logPath)
		for _, line := range strings.Split(string(data), "\n") {
			var l struct {
				Msg           string `json:"msg"`
				TTL           string `json:"ttl"`
				RenewInterval string `json:"renew_interval"`
				RenewDeadline string `json:"renew_deadline"`
				KillGrace     string `json:"kill_grace"`
			}
			if json.Unmarshal([]byte(line), &l) != nil || l.Msg != "starting" {
				continue
			}
			var t timing
			var err error
			for _, f := range []struct {
				dst *time.Duration
				s   string
			}{{&t.ttl, l.TTL}, {&t.grace, l.KillGrace}, {&t.deadline, l.RenewDeadline}, {&t.interval, l.RenewInterval}} {
				if *f.dst, err = time.ParseDuration(f.s); err != nil {
					return timing{}, fmt.Errorf("%s: %q line: %w", logPath, l.Msg, err)
				}
			}
			return t, nil
		}
		if time.Now().After(deadline) {
			return timing{}, fmt.Errorf("%s: no \"starting\" line with the timing within %v", logPath, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// derivedDeadline is the renew deadline leaderrun derives from --ttl and
// --kill-grace (config.Timing.Normalize; docs/design.md §2).
func derivedDeadline(ttl, grace time.Duration) time.Duration {
	margin := 2 * time.Second
	if ttl < 15*time.Second {
		margin = max(time.Second, ttl*2/15)
	}
	return ttl - grace - margin
}

// replica is one generation of one replica: a leaderrun process.
type replica struct {
	idx, gen int
	identity string
	cmd      *exec.Cmd
	pid      int
	stime    uint64
	logPath  string
	done     chan struct{} // closed once the process was reaped
	status   string        // once done: how it ended, as os.ProcessState.String says
	exitAt   time.Time     // once done: when it was reaped

	stopSig  syscall.Signal // the signal the driver ended it with
	stopAt   time.Time
	want     []string // acceptable exit statuses (ProcessState.String())
	wantWhy  string
	checked  bool
	exitNote string
}

func (r *replica) exited() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// healthFlapArgs gives a replica a health check that fails at random, a
// fraction flap of the time: a byte of /dev/urandom below flap × 256.
func healthFlapArgs(flap float64) []string {
	below := int(flap * 256)
	return []string{
		"--health-cmd", fmt.Sprintf("test $(od -An -N1 -tu1 /dev/urandom) -ge %d", below),
		"--health-interval", "300ms", "--health-timeout", "300ms", "--health-retries", "2",
		"--health-cooldown", "2s",
	}
}

// startReplica starts a new generation of replica idx.
func (c *cluster) startReplica(idx int) *replica {
	c.t.Helper()
	c.gens++
	r := &replica{idx: idx, gen: c.gens, done: make(chan struct{})}
	r.identity = fmt.Sprintf("r%dg%d", idx, r.gen)
	r.logPath = filepath.Join(c.dir, r.identity+".log")
	args := []string{
		"--name", leaseName, "--store", c.dsn(idx), "--identity", r.identity,
		"--ttl", c.timing.ttl.String(), "--kill-grace", c.timing.grace.String(),
		"--restart-delay", "100ms", "--log-format", "json", "--log-level", "debug",
	}
	if c.partitions > 0 {
		args = append(args, "--partitions", strconv.Itoa(c.partitions),
			"--reconcile-interval", c.timing.reconcile.String())
	} else if *flagFlap > 0 {
		args = append(args, healthFlapArgs(*flagFlap)...)
	}
	args = append(args, "--", c.self)
	cmd := exec.Command(c.bin, args...)
	cmd.Env = c.env
	cmd.Dir = c.dir
	logf, err := os.Create(r.logPath)
	if err != nil {
		c.t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stdout, cmd.Stderr = logf, logf
	// Pdeathsig: a replica does not outlive a test binary that was killed
	// (its cleanup, which kills the replicas, then never runs).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := theReaper.startCmd(cmd); err != nil {
		c.t.Fatalf("start replica %s: %v", r.identity, err)
	}
	r.cmd, r.pid = cmd, cmd.Process.Pid
	r.stime, _ = procStartTime(r.pid)
	go func() {
		cmd.Wait()
		theReaper.forget(r.pid)
		r.status, r.exitAt = cmd.ProcessState.String(), time.Now()
		close(r.done)
	}()
	if idx < len(c.reps) {
		c.reps[idx] = r
	} else {
		c.reps = append(c.reps, r)
	}
	c.all = append(c.all, r)
	return r
}

// signal sends sig to the replica's leaderrun and records it.
func (r *replica) signal(sig syscall.Signal) {
	if sig == syscall.SIGKILL || sig == syscall.SIGTERM {
		r.stopSig, r.stopAt = sig, time.Now()
	}
	syscall.Kill(r.pid, sig)
}

// waitExit waits up to d for the replica to exit.
func (r *replica) waitExit(d time.Duration) bool {
	select {
	case <-r.done:
		return true
	case <-time.After(d):
		return false
	}
}

// replicaOf returns the replica generation whose identity is holder.
func (c *cluster) replicaOf(holder string) *replica {
	for _, r := range c.all {
		if r.identity == holder {
			return r
		}
	}
	return nil
}

// childOf reports whether ppid, a child's parent, is leaderrun's pid, or
// the init of the child's PID namespace that leaderrun started.
func childOf(ppid, leaderrun int) bool {
	if ppid == leaderrun {
		return true
	}
	st, ok := procStat(ppid)
	return ok && ppid != 0 && st.ppid == leaderrun
}

// leader returns the latest child's start event when that child is alive
// and its leaderrun is a running replica.
func (c *cluster) leader() (event, *replica, bool) {
	evs := c.log.snapshot()
	for i := len(evs) - 1; i >= 0; i-- {
		e := evs[i]
		if e.kind != "start" {
			continue
		}
		r := c.replicaOf(e.kv["holder"])
		if r == nil || r.exited() || !childOf(int(e.int("ppid")), r.pid) || !aliveAs(e.pid, uint64(e.int("stime"))) {
			return event{}, nil, false
		}
		return e, r, true
	}
	return event{}, nil, false
}

// held returns, for every partition ("" for the one name) whose latest
// child is alive and supervised by a running replica, that child's start
// event.
func (c *cluster) held() map[string]event {
	out := map[string]event{}
	for part, e := range c.log.latestStarts() {
		r := c.replicaOf(e.kv["holder"])
		if r != nil && !r.exited() && childOf(int(e.int("ppid")), r.pid) && aliveAs(e.pid, uint64(e.int("stime"))) {
			out[part] = e
		}
	}
	return out
}

// parts lists the run's partitions as the events name them: "0" … "N-1",
// or "" for the one name.
func (c *cluster) parts() []string {
	if c.partitions == 0 {
		return []string{""}
	}
	ps := make([]string, c.partitions)
	for i := range ps {
		ps[i] = strconv.Itoa(i)
	}
	return ps
}

// waitHeld waits up to d until every partition (or the one name) has a
// child, and returns their start events.
func (c *cluster) waitHeld(d time.Duration) (map[string]event, bool) {
	deadline := time.Now().Add(d)
	for {
		h := c.held()
		if len(h) == len(c.parts()) {
			return h, true
		}
		if time.Now().After(deadline) {
			return h, false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitLeader waits up to d for a leader.
func (c *cluster) waitLeader(d time.Duration) (event, *replica, bool) {
	deadline := time.Now().Add(d)
	for {
		if e, r, ok := c.leader(); ok {
			return e, r, true
		}
		if time.Now().After(deadline) {
			return event{}, nil, false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// stopAll ends the run as an operator would: SIGTERM to the standbys, then
// to the leader, each expecting its documented status; whatever does not
// exit in time is killed with its process group and reported. Partitioned,
// the replicas leave one after the other, each handing its partitions to
// those left.
func (c *cluster) stopAll() {
	c.stopAt = time.Now()
	if c.partitions > 0 {
		for _, r := range c.reps {
			if !r.exited() {
				c.terminate(r)
				c.awaitOrKill(r, c.timing.grace+10*time.Second)
			}
		}
		return
	}
	_, lead, _ := c.leader()
	var standbys []*replica
	for _, r := range c.reps {
		if r != lead && !r.exited() {
			standbys = append(standbys, r)
		}
	}
	for _, r := range standbys {
		c.terminate(r)
	}
	for _, r := range standbys {
		c.awaitOrKill(r, 10*time.Second)
	}
	if lead != nil && !lead.exited() {
		c.terminate(lead)
		c.awaitOrKill(lead, c.timing.grace+10*time.Second)
	}
}

// terminate sends SIGTERM to r and records the status it must exit with.
func (c *cluster) terminate(r *replica) {
	r.want, r.wantWhy = c.expectTerm(r)
	r.signal(syscall.SIGTERM)
}

// expectTerm is the status a replica must exit with when SIGTERM'd now:
// its child's (the recording child exits childExitCode; one armed to ignore
// SIGTERM is killed), or 0 for a standby. A partitioned replica exits 0
// once it has handed off its partitions.
func (c *cluster) expectTerm(r *replica) ([]string, string) {
	if c.partitions > 0 {
		return []string{"exit status 0"}, "partitioned: 0 once stopped"
	}
	evs := c.log.snapshot()
	for i := len(evs) - 1; i >= 0; i-- {
		e := evs[i]
		if e.kind != "start" || e.kv["holder"] != r.identity {
			continue
		}
		if !aliveAs(e.pid, uint64(e.int("stime"))) {
			break
		}
		want, why := []string{fmt.Sprintf("exit status %d", childExitCode)}, fmt.Sprintf("leader; its child %d exits %d", e.pid, childExitCode)
		if armedIgnore(evs[i:], e.token) {
			// leaderrun SIGKILLs it after the kill grace, and exits 137
			// rather than die by its own SIGKILL.
			want, why = []string{"exit status 137"}, fmt.Sprintf("leader; its child %d ignores SIGTERM", e.pid)
		}
		if *flagFlap > 0 {
			// A failing health check may have handed the name over, or
			// begun to, since the child was seen: a standby's 0 then.
			want, why = append(want, "exit status 0"), why+", or a standby since a health hand-over"
		}
		return want, why
	}
	return []string{"exit status 0"}, "standby"
}

func armedIgnore(evs []event, token int64) bool {
	for _, e := range evs {
		if e.kind == "armed" && e.token == token && e.kv["what"] == armIgnoreTerm {
			return true
		}
	}
	return false
}

// awaitOrKill waits for r to exit; after d it kills r's process group.
func (c *cluster) awaitOrKill(r *replica, d time.Duration) {
	if r.waitExit(d) {
		return
	}
	r.exitNote = fmt.Sprintf("did not exit within %v of %v; killed", d, r.stopSig)
	syscall.Kill(-r.pid, syscall.SIGKILL)
	syscall.Kill(r.pid, syscall.SIGKILL)
	r.waitExit(5 * time.Second)
}

// kill ends everything the cluster started, for a run that failed half-way.
// It is safe to call after stopAll.
func (c *cluster) kill() {
	for _, r := range c.all {
		if !r.exited() {
			syscall.Kill(-r.pid, syscall.SIGKILL)
			syscall.Kill(r.pid, syscall.SIGCONT)
			syscall.Kill(r.pid, syscall.SIGKILL)
		}
	}
	for _, r := range c.all {
		r.waitExit(5 * time.Second)
	}
	for _, p := range c.descendants() {
		if aliveAs(p.pid, p.stime) {
			syscall.Kill(-p.pid, syscall.SIGKILL)
			syscall.Kill(p.pid, syscall.SIGKILL)
		}
	}
	c.closeProxies()
}

// closeProxies closes every proxy and checks that none still listens.
func (c *cluster) closeProxies() []string {
	var problems []string
	for i, ps := range c.proxies {
		for j, p := range ps {
			if p == nil {
				continue
			}
			addr := p.Addr()
			if err := p.Close(); err != nil {
				problems = append(problems, fmt.Sprintf("proxy %d.%d: close: %v", i, j, err))
			}
			if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				conn.Close()
				problems = append(problems, fmt.Sprintf("proxy %d.%d still accepts on %s after Close", i, j, addr))
			}
			ps[j] = nil
		}
	}
	return problems
}

// proc names one process for ever: pid and start time.
type proc struct {
	pid   int
	stime uint64
	what  string
	token int64
}

// descendants lists every child and grandchild the event log names.
func (c *cluster) descendants() []proc {
	var ps []proc
	for _, e := range c.log.snapshot() {
		switch e.kind {
		case "start":
			ps = append(ps, proc{e.pid, uint64(e.int("stime")), "child", e.token})
		case "gstart":
			ps = append(ps, proc{e.pid, uint64(e.int("stime")), "grandchild", e.token})
		}
	}
	return ps
}

// survivors lists every process of the run that is still alive: replicas,
// children, grandchildren, and any other process this subreaper adopted.
func (c *cluster) survivors() []string {
	var out []string
	for _, r := range c.all {
		if aliveAs(r.pid, r.stime) {
			out = append(out, fmt.Sprintf("replica %s pid %d", r.identity, r.pid))
		}
	}
	for _, p := range c.descendants() {
		if aliveAs(p.pid, p.stime) {
			out = append(out, fmt.Sprintf("%s pid %d of token %d", p.what, p.pid, p.token))
		}
	}
	return out
}

// replicaLogTail returns the last n lines of a replica's log, for reports.
func replicaLogTail(path string, n int) string {
	data, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
