package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/internal/testenv/kubetest"
)

// The rollout benchmark (bench -rollout): a Deployment's rolling update of
// leaderrun replicas, simulated against a real kube-apiserver (no kubelet:
// a pod is its Pod object and a leaderrun process), as
// packaging/kubernetes/deployment.yaml asks for it — RollingUpdate with
// maxSurge 1 and maxUnavailable 0, the leader label selected by the
// Service — and the same replicas under the Recreate strategy that the
// manifest had before (readiness on /leader). The pods' labels are polled
// all along. It is a mode of its own, apart from the report's sections:
//
//	cd lab && go run ./bench -rollout -runs 10 -out /tmp/rollout.md
//
// Each replica runs as across hosts: the boot id it reads is its own (a
// bind mount in a mount namespace of its own), so that no replica takes
// the same-host fast path; the hand-off goes through the Lease. Needs root
// (for that), the API server built (make kube-apiserver) and etcd.

// rolloutLabel is the manifest's leader label, and rolloutSelector the
// Service's selector.
const (
	rolloutLabel    = "leaderrun/role=leader"
	rolloutSelector = "app=relay," + rolloutLabel
)

type rolloutOptions struct {
	runs     int
	replicas int
	poll     time.Duration
	out      string
	lrBin    string
}

func rolloutMain(args []string) int {
	var o rolloutOptions
	fs := flag.NewFlagSet("bench -rollout", flag.ExitOnError)
	fs.IntVar(&o.runs, "runs", 10, "rollouts of each strategy")
	fs.IntVar(&o.replicas, "replicas", 3, "replicas of the Deployment")
	fs.DurationVar(&o.poll, "poll", 20*time.Millisecond, "how often the pods' labels are read")
	fs.StringVar(&o.out, "out", "", "write the Markdown here (default: standard output)")
	fs.StringVar(&o.lrBin, "leaderrun", "", "leaderrun binary to measure (default: make build)")
	fs.Parse(args[1:])
	r, err := runRollouts(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench -rollout:", err)
		return 1
	}
	md := r.markdown(strings.Join(append([]string{"go run ./bench"}, args...), " "))
	if o.out == "" {
		fmt.Print(md)
		return 0
	}
	if err := os.WriteFile(o.out, []byte(md), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "bench -rollout:", err)
		return 1
	}
	return 0
}

// rolloutEnv is the benchmark's API server, binary and scratch directory.
type rolloutEnv struct {
	o     rolloutOptions
	srv   *kubetest.Server
	lrBin string
	dir   string
	start time.Time
}

func (e *rolloutEnv) progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "[%6.1fs] %s\n", time.Since(e.start).Seconds(), fmt.Sprintf(format, args...))
}

// rolloutResult is what the runs measured.
type rolloutResult struct {
	Server   string
	Runs     int
	Replicas int
	Poll     time.Duration
	Load     [2]string // load average before, after
	Rolling  []rollingRun
	Recreate []recreateRun
	Took     time.Duration
}

// rollingRun is one rolling update.
type rollingRun struct {
	// Unlabelled is the longest time no pod carried the label: from the
	// last poll that found one to the next that found one.
	Unlabelled time.Duration
	Twice      int             // polls that found two or more labelled pods
	Polls      int             // polls answered
	Failed     int             // polls not answered
	Interval   time.Duration   // the longest time between two answered polls
	Handoffs   []time.Duration // SIGTERM to the leader → the next leader's command started
}

// recreateRun is one update under the Recreate strategy.
type recreateRun struct {
	// NoLeader is from the SIGTERM to the old pods (all at once) to the
	// new leader's command's start: the old pods stop first, then the new
	// ones start and elect.
	NoLeader time.Duration
}

func runRollouts(o rolloutOptions) (*rolloutResult, error) {
	if os.Geteuid() != 0 {
		return nil, errors.New("needs root: each replica's boot id is masked in a mount namespace of its own")
	}
	if err := kubeServerBuilt(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "leaderrun-rollout-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	e := &rolloutEnv{o: o, dir: dir, start: time.Now(), lrBin: o.lrBin}
	res := &rolloutResult{Runs: o.runs, Replicas: o.replicas, Poll: o.poll}
	res.Load[0] = loadavg()
	if e.lrBin == "" {
		e.progress("building leaderrun (make build)")
		root, err := repoRoot()
		if err != nil {
			return nil, err
		}
		e.lrBin = filepath.Join(dir, "leaderrun")
		mk := exec.Command("make", "build", "OUT="+e.lrBin)
		mk.Dir = root
		if out, err := mk.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("make build: %v\n%s", err, out)
		}
	}
	e.progress("starting kube-apiserver and its etcd")
	srv, stop, err := startKube(dir)
	if err != nil {
		return nil, err
	}
	defer stop()
	e.srv = srv
	res.Server = kubetest.Version
	for i := range o.runs {
		e.progress("rolling update %d of %d", i+1, o.runs)
		r, err := e.rolling()
		if err != nil {
			return nil, fmt.Errorf("rolling update %d: %w", i+1, err)
		}
		res.Rolling = append(res.Rolling, r)
		e.progress("recreate %d of %d", i+1, o.runs)
		c, err := e.recreate()
		if err != nil {
			return nil, fmt.Errorf("recreate %d: %w", i+1, err)
		}
		res.Recreate = append(res.Recreate, c)
	}
	res.Load[1] = loadavg()
	res.Took = time.Since(e.start)
	return res, nil
}

// repoRoot is the product's module: lab's parent.
func repoRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	mod := strings.TrimSpace(string(out))
	if err != nil || mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("run from inside the lab module (go env GOMOD: %v)", err)
	}
	return filepath.Dir(filepath.Dir(mod)), nil
}

// rolloutReplica is one pod: its Pod object and its leaderrun.
type rolloutReplica struct {
	pod  string
	log  string
	cmd  *exec.Cmd
	done chan struct{}
}

// deployment is one rollout's namespace and replicas.
type deployment struct {
	e        *rolloutEnv
	ns       string
	dsn      string
	label    bool // --leader-label (the rolling manifest) or not (the Recreate one)
	replicas []*rolloutReplica
}

func (e *rolloutEnv) deployment(label bool) (*deployment, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ns, err := e.srv.CreateNamespace(ctx)
	if err != nil {
		return nil, err
	}
	kubeconfig := filepath.Join(e.dir, ns+".kubeconfig")
	if err := e.srv.WriteKubeconfig(kubeconfig, kubetest.AdminToken, ns); err != nil {
		return nil, err
	}
	return &deployment{e: e, ns: ns, dsn: "k8s://" + ns + "?kubeconfig=" + kubeconfig, label: label}, nil
}

// deploy starts a Deployment's replicas in a namespace of their own, with
// the leader label or not; the caller closes it.
func (e *rolloutEnv) deploy(label bool) (*deployment, []*rolloutReplica, error) {
	d, err := e.deployment(label)
	if err != nil {
		return nil, nil, err
	}
	rs, err := d.startAll("relay-old-")
	if err != nil {
		d.close()
		return nil, nil, err
	}
	return d, rs, nil
}

// start creates the pod's object, as the ReplicaSet would, then starts its
// leaderrun, as the kubelet would, with a boot id of its own.
func (d *deployment) start(pod string) (*rolloutReplica, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := d.e.srv.CreatePod(ctx, d.ns, pod, map[string]string{"app": "relay"}); err != nil {
		return nil, err
	}
	r := &rolloutReplica{pod: pod, log: filepath.Join(d.e.dir, d.ns+"-"+pod+".log"), done: make(chan struct{})}
	boot := filepath.Join(d.e.dir, d.ns+"-"+pod+".boot_id")
	if err := os.WriteFile(boot, []byte(randomBootID()+"\n"), 0o644); err != nil {
		return nil, err
	}
	argv := []string{"unshare", "--mount", "--", "sh", "-c", `mount --bind "$0" /proc/sys/kernel/random/boot_id && exec "$@"`, boot,
		d.e.lrBin, "--name", "relay", "--store", d.dsn, "--identity", pod}
	if d.label {
		argv = append(argv, "--leader-label", rolloutLabel)
	}
	argv = append(argv, "--", "sleep", "100000")
	logf, err := os.Create(r.log)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	r.cmd = exec.Command(argv[0], argv[1:]...)
	r.cmd.Env = append(os.Environ(), "POD_NAME="+pod, "POD_NAMESPACE="+d.ns)
	r.cmd.Stdout, r.cmd.Stderr = logf, logf
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { r.cmd.Wait(); close(r.done) }()
	d.replicas = append(d.replicas, r)
	return r, nil
}

// startAll starts the Deployment's replicas, named prefix0, prefix1, ….
func (d *deployment) startAll(prefix string) ([]*rolloutReplica, error) {
	var rs []*rolloutReplica
	for i := range d.e.o.replicas {
		r, err := d.start(fmt.Sprintf("%s%d", prefix, i))
		if err != nil {
			return nil, err
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// awaitLabelled waits until the Service selects pod alone.
func (d *deployment) awaitLabelled(pod string) error {
	return await("the label on "+pod+" alone", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		names, err := d.e.srv.Labelled(ctx, d.ns, rolloutSelector)
		return err == nil && slices.Equal(names, []string{pod})
	})
}

// stop ends the pod: SIGTERM (what the pod's deletion sends), its exit,
// then its Pod object's removal.
func (d *deployment) stop(r *rolloutReplica) error {
	r.cmd.Process.Signal(syscall.SIGTERM)
	if err := r.wait(); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := d.e.srv.Admin(ctx, "DELETE", "/api/v1/namespaces/"+d.ns+"/pods/"+r.pod+"?gracePeriodSeconds=0", nil)
	return err
}

func (r *rolloutReplica) wait() error {
	select {
	case <-r.done:
		return nil
	case <-time.After(time.Minute):
		return fmt.Errorf("%s did not exit within a minute of SIGTERM", r.pod)
	}
}

// close kills whatever still runs.
func (d *deployment) close() {
	for _, r := range d.replicas {
		syscall.Kill(-r.cmd.Process.Pid, syscall.SIGKILL)
		<-r.done
	}
}

// logTime returns the time of the first line of r's log that matches re,
// or the zero time.
func (r *rolloutReplica) logTime(re *regexp.Regexp) time.Time {
	f, err := os.Open(r.log)
	if err != nil {
		return time.Time{}
	}
	defer f.Close()
	return firstLogTime(f, re)
}

var logTimeRE = regexp.MustCompile(`^time=(\S+) `)

func firstLogTime(rd io.Reader, re *regexp.Regexp) time.Time {
	sc := bufio.NewScanner(rd)
	for sc.Scan() {
		if !re.MatchString(sc.Text()) {
			continue
		}
		if m := logTimeRE.FindStringSubmatch(sc.Text()); m != nil {
			if t, err := time.Parse(time.RFC3339Nano, m[1]); err == nil {
				return t
			}
		}
	}
	return time.Time{}
}

var (
	childStarted = regexp.MustCompile(`msg="child started"`)
	standingBy   = regexp.MustCompile(`msg="lease held by another; standing by"`)
)

// await waits until f returns true, for at most a minute.
func await(what string, f func() bool) error {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if f() {
			return nil
		}
	}
	return fmt.Errorf("no %s within a minute", what)
}

// leader waits for a running replica whose command started at or after
// since, and returns it and when its command started.
func (d *deployment) leader(since time.Time) (*rolloutReplica, time.Time, error) {
	var found *rolloutReplica
	var at time.Time
	err := await("new leader", func() bool {
		for _, r := range d.replicas {
			select {
			case <-r.done:
				continue
			default:
			}
			if t := r.logTime(childStarted); !t.IsZero() && !t.Before(since.Truncate(time.Millisecond)) {
				found, at = r, t
				return true
			}
		}
		return false
	})
	return found, at, err
}

// labelPoll is one poll of the labelled pods.
type labelPoll struct {
	at time.Time // the middle of the request
	n  int       // pods labelled; -1: no answer
}

// pollLabels reads the pods the Service selects every e.o.poll until stop
// is called, and returns the samples.
func (d *deployment) pollLabels() (stop func() []labelPoll) {
	quit := make(chan struct{})
	out := make(chan []labelPoll, 1)
	go func() {
		var samples []labelPoll
		t := time.NewTicker(d.e.o.poll)
		defer t.Stop()
		for {
			select {
			case <-quit:
				out <- samples
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			t0 := time.Now()
			names, err := d.e.srv.Labelled(ctx, d.ns, rolloutSelector)
			t1 := time.Now()
			cancel()
			s := labelPoll{at: t0.Add(t1.Sub(t0) / 2), n: len(names)}
			if err != nil {
				s.n = -1
			}
			samples = append(samples, s)
		}
	}()
	return func() []labelPoll { close(quit); return <-out }
}

// rolling runs one rolling update: replicas old pods, then for each a new
// pod (maxSurge 1) that must stand by (Ready, maxUnavailable 0) before the
// old one is stopped.
func (e *rolloutEnv) rolling() (rollingRun, error) {
	var run rollingRun
	d, old, err := e.deploy(true)
	if err != nil {
		return run, err
	}
	defer d.close()
	leader, _, err := d.leader(time.Time{})
	if err != nil {
		return run, err
	}
	if err := d.awaitLabelled(leader.pod); err != nil {
		return run, err
	}
	for _, r := range old {
		if r == leader {
			continue
		}
		if err := await(r.pod+" standing by", func() bool { return !r.logTime(standingBy).IsZero() }); err != nil {
			return run, err
		}
	}
	stopPoll := d.pollLabels()
	for i, o := range old {
		n, err := d.start(fmt.Sprintf("relay-new-%d", i))
		if err != nil {
			return run, err
		}
		if err := await(n.pod+" standing by", func() bool { return !n.logTime(standingBy).IsZero() }); err != nil {
			return run, err
		}
		sent := time.Now()
		if err := d.stop(o); err != nil {
			return run, err
		}
		if o == leader {
			next, at, err := d.leader(sent)
			if err != nil {
				return run, err
			}
			run.Handoffs = append(run.Handoffs, at.Sub(sent))
			leader = next
		}
	}
	if err := d.awaitLabelled(leader.pod); err != nil {
		return run, err
	}
	samples := stopPoll()
	run.Unlabelled, run.Twice, run.Polls, run.Failed, run.Interval = gaps(samples)
	return run, nil
}

// gaps reads samples: the longest time from a poll that found a labelled
// pod to the next that found one, the polls that found two or more, the
// polls answered and not, and the longest time between two answered polls.
func gaps(samples []labelPoll) (longest time.Duration, twice, answered, failed int, interval time.Duration) {
	var lastLabelled, lastAnswered time.Time
	for _, s := range samples {
		if s.n < 0 {
			failed++
			continue
		}
		answered++
		if !lastAnswered.IsZero() {
			interval = max(interval, s.at.Sub(lastAnswered))
		}
		lastAnswered = s.at
		if s.n >= 2 {
			twice++
		}
		if s.n >= 1 {
			if !lastLabelled.IsZero() {
				longest = max(longest, s.at.Sub(lastLabelled))
			}
			lastLabelled = s.at
		}
	}
	return longest, twice, answered, failed, interval
}

// recreate runs one update under the Recreate strategy: every old pod is
// deleted at once, and the new pods start once all of them are gone; the
// name has no leader from the old pods' SIGTERM until a new one's command
// starts.
func (e *rolloutEnv) recreate() (recreateRun, error) {
	var run recreateRun
	d, old, err := e.deploy(false)
	if err != nil {
		return run, err
	}
	defer d.close()
	if _, _, err := d.leader(time.Time{}); err != nil {
		return run, err
	}
	for _, r := range old {
		if err := await(r.pod+" started", func() bool {
			return !r.logTime(standingBy).IsZero() || !r.logTime(childStarted).IsZero()
		}); err != nil {
			return run, err
		}
	}
	sent := time.Now()
	errs := make(chan error, len(old))
	for _, r := range old {
		go func() { errs <- d.stop(r) }()
	}
	for range old {
		if err := <-errs; err != nil {
			return run, err
		}
	}
	if _, err := d.startAll("relay-new-"); err != nil {
		return run, err
	}
	_, at, err := d.leader(sent)
	if err != nil {
		return run, err
	}
	run.NoLeader = at.Sub(sent)
	return run, nil
}

func (r *rolloutResult) markdown(command string) string {
	var w mdw
	w.p("### Rolling updates with the leader label")
	w.p("")
	m := readMachine()
	w.p("*From a run of its own (`bench -rollout`), %s, on %d × %s, load average %s before and %s after; the run took %s:*",
		time.Now().Format("2006-01-02"), m.CPUs, m.CPUModel, r.Load[0], r.Load[1], r.Took.Round(time.Second))
	w.p("")
	w.p("    cd lab && %s", command)
	w.p("")
	w.p("A Deployment of %d replicas as packaging/kubernetes/deployment.yaml runs it, simulated against kube-apiserver %s", r.Replicas, r.Server)
	w.p("(no kubelet: a pod is its Pod object, created first as the ReplicaSet would, and a leaderrun process; each")
	w.p("replica reads a boot id of its own, as on hosts of their own, so hand-offs go through the Lease: `--store")
	w.p("k8s://…`, default timings). Rolling update (`maxSurge: 1`, `maxUnavailable: 0`, `--leader-label`): for each old")
	w.p("pod, a new one is started and waited for until it stands by, then the old one gets SIGTERM; its Pod object is")
	w.p("deleted once it exited. The pods the Service selects (`%s`) were read every %s throughout.", rolloutSelector, r.Poll)
	w.p("Recreate (the manifest before, readiness on `/leader`): every old pod gets SIGTERM at once, the new pods start")
	w.p("once the old ones exited, and elect; no kubelet start, image pull or readiness probe period is counted, so")
	w.p("a real cluster's Recreate outage is longer.")
	w.p("")
	var unl, hand, noLeader, interval []time.Duration
	twice, polls, failed := 0, 0, 0
	for _, run := range r.Rolling {
		unl = append(unl, run.Unlabelled)
		hand = append(hand, run.Handoffs...)
		interval = append(interval, run.Interval)
		twice += run.Twice
		polls += run.Polls
		failed += run.Failed
	}
	for _, run := range r.Recreate {
		noLeader = append(noLeader, run.NoLeader)
	}
	su, sh, sn, si := summarize(unl), summarize(hand), summarize(noLeader), summarize(interval)
	w.p("| measurement | p50 | max | n | target |")
	w.p("|---|---|---|---|---|")
	w.p("| rolling update: longest time no pod labelled, per rollout (from the last poll that found the label to the next; ≤ one poll interval more than the truth) | %s ms | %s ms | %d | ≤ 250 ms |", ms(su.P50), ms(su.Max), su.N)
	w.p("| rolling update: polls that found two pods labelled | %d of %d answered (%d unanswered) | | | 0 |", twice, polls, failed)
	w.p("| rolling update: lease hand-off, SIGTERM to the leader → the next leader's command started | %s ms | %s ms | %d | |", ms(sh.P50), ms(sh.Max), sh.N)
	w.p("| rolling update: longest time between two answered polls, per rollout | %s ms | %s ms | %d | |", ms(si.P50), ms(si.Max), si.N)
	w.p("| Recreate: no leader, SIGTERM to the old pods → a new leader's command started | %s ms | %s ms | %d | |", ms(sn.P50), ms(sn.Max), sn.N)
	w.p("")
	return w.String()
}
