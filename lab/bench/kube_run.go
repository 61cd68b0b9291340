package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/leaderrun/leaderrun/internal/testenv/kubetest"
	"github.com/leaderrun/leaderrun/lab/bench/internal/mono"
	_ "github.com/leaderrun/leaderrun/lease/kubernetes" // k8s:// for the crash runs' reads
)

func init() { kubeSection = measureKube }

// kubeSettle is how long a group runs before its load window opens: past
// the followers' start (LIST and WATCH of the informer, the access review,
// the clock's calibration).
const kubeSettle = 15 * time.Second

// kubeEnv is the section's API server and binaries.
type kubeEnv struct {
	srv     *kubetest.Server
	lrBin   string // leaderrun, as make build builds it
	elector string // bench/kubeelector
	http    *http.Client
}

func measureKube(b *bench, ctx context.Context) *kubeResult {
	o := b.opt
	res := &kubeResult{HandoffRuns: o.kubeHandoff, CrashRuns: o.kubeCrash, Window: o.kubeWindow, Settle: kubeSettle,
		Busy: map[string]float64{}}
	if err := kubeServerBuilt(); err != nil {
		res.Note = "not measured: " + err.Error()
		return res
	}
	env := &kubeEnv{http: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}}
	var err error
	b.progress("kube: building leaderrun and bench/kubeelector")
	if env.lrBin, env.elector, err = b.buildKube(); err != nil {
		res.Note = "not measured: " + err.Error()
		return res
	}
	b.progress("kube: starting kube-apiserver and its etcd")
	dir, err := os.MkdirTemp(b.tmp, "kube-")
	if err != nil {
		res.Note = "not measured: " + err.Error()
		return res
	}
	srv, stop, err := startKube(dir)
	if err != nil {
		res.Note = "not measured: " + err.Error()
		return res
	}
	defer stop()
	env.srv = srv
	// Built from the k8s.io modules, the server's /version reads
	// v0.0.0-master: the release is kubetest's.
	res.Server = fmt.Sprintf("kube-apiserver %s (built from the k8s.io modules by internal/testenv/kubeapiserver; its /version says %s)",
		kubetest.Version, env.version(ctx))
	res.Masked = maskedHow
	if err := exec.Command("unshare", "--mount", "--", "true").Run(); err != nil {
		res.Masked = "not measured: unshare --mount failed (" + err.Error() + "); the masked rows need root"
	}

	lr := func(scope string) (*contender, error) {
		dsn, err := env.dsn(ctx, b, scope)
		if err != nil {
			return nil, err
		}
		return b.kubeLeaderrun(kubeLRLabel, env.lrBin, dsn, false), nil
	}
	masked := func(scope string) (*contender, error) {
		if strings.HasPrefix(res.Masked, "not measured") {
			return nil, nil
		}
		dsn, err := env.dsn(ctx, b, scope)
		if err != nil {
			return nil, err
		}
		return b.kubeLeaderrun(kubeLRMaskedLabel, env.lrBin, dsn, true), nil
	}
	clientGo := func(scope string) (*contender, error) {
		dsn, err := env.dsn(ctx, b, scope)
		if err != nil {
			return nil, err
		}
		c := b.kubeElector(env.elector, dsn)
		c.leaseLeft = func(name string) (time.Duration, error) { return env.leaseLeft(ctx, dsn, name) }
		return c, nil
	}
	makers := []func(string) (*contender, error){lr, masked, clientGo}

	for _, mk := range makers {
		if b.stopping() {
			return res
		}
		c, err := mk("handoff")
		if err != nil {
			res.Note += fmt.Sprintf("hand-off: %v. ", err)
			continue
		}
		if c == nil {
			continue
		}
		b.progress("kube hand-off: %s, %d runs", c.Label, o.kubeHandoff)
		busy := machineBusy()
		res.Handoff = append(res.Handoff, b.runFailover(c, "handoff", o.kubeHandoff, o.replicas))
		res.Busy["handoff "+c.Label] = busy()
	}

	// leaderrun's same-host crash takes milliseconds: alone first. The
	// two that wait for the Lease's expiry then run side by side, idle
	// but for their timers.
	if c, err := lr("crash"); err != nil {
		res.Note += fmt.Sprintf("crash: %v. ", err)
	} else if !b.stopping() {
		b.progress("kube crash: %s, %d runs", c.Label, o.kubeCrash)
		busy := machineBusy()
		res.Crash = append(res.Crash, b.runFailover(c, "crash", o.kubeCrash, o.replicas))
		res.Busy["crash "+c.Label] = busy()
	}
	var slow []*contender
	for _, mk := range makers[1:] {
		c, err := mk("crash")
		if err != nil {
			res.Note += fmt.Sprintf("crash: %v. ", err)
			continue
		}
		if c != nil {
			slow = append(slow, c)
		}
	}
	if !b.stopping() && len(slow) > 0 {
		b.progress("kube crash: %d systems side by side, %d runs each (each waits for the Lease's expiry)", len(slow), o.kubeCrash)
		busy := machineBusy()
		out := make([]*failoverResult, len(slow))
		var wg sync.WaitGroup
		for i, c := range slow {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out[i] = b.runFailover(c, "crash", o.kubeCrash, o.replicas)
			}()
		}
		wg.Wait()
		res.Crash = append(res.Crash, out...)
		res.Busy["crash expiry-bound"] = busy()
	}

	// The load: the server alone, then each system's group, one at a
	// time, so that the server's counters are the group's (plus the
	// server's own, which the first window measures).
	if !b.stopping() {
		b.progress("kube load: the server alone, %v window", o.kubeWindow)
		res.Load = append(res.Load, b.kubeLoad(env, "nobody (the API server alone)", nil, o.kubeWindow))
	}
	for _, mk := range []func(string) (*contender, error){lr, clientGo} {
		if b.stopping() {
			break
		}
		c, err := mk("load")
		if err != nil {
			res.Load = append(res.Load, &kubeLoad{Label: "?", Err: err.Error()})
			continue
		}
		b.progress("kube load: %s, 1 leader + 2 followers, %v settle + %v window", c.Label, kubeSettle, o.kubeWindow)
		res.Load = append(res.Load, b.kubeLoad(env, c.Label, c, o.kubeWindow))
	}
	res.Note = strings.TrimSpace(res.Note)
	return res
}

// kubeServerBuilt reports whether kubetest's API server binary is there,
// without building it (kubetest.Binary would: minutes of compiling).
func kubeServerBuilt() error {
	if os.Getenv(kubetest.EnvBinary) != "" {
		return nil
	}
	out, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		return fmt.Errorf("go env GOCACHE: %w", err)
	}
	bin := filepath.Join(strings.TrimSpace(string(out)), "leaderrun", "kube-apiserver-"+kubetest.Version)
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("no kube-apiserver at %s: `make kube-apiserver` builds it (minutes)", bin)
	}
	return nil
}

// buildKube builds leaderrun with `make build`, and the client-go
// elector.
func (b *bench) buildKube() (lr, elector string, err error) {
	lr, elector = b.tmpPath("leaderrun-k8s"), b.tmpPath("kubeelector")
	mk := exec.Command("make", "build", "OUT="+lr)
	mk.Dir = b.root
	if out, err := mk.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("make build: %v\n%s", err, out)
	}
	cmd := exec.Command("go", "build", "-trimpath", "-o", elector, "./bench/kubeelector")
	cmd.Dir = b.lab
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("go build ./bench/kubeelector: %v\n%s", err, out)
	}
	return lr, elector, nil
}

// version is the API server's gitVersion.
func (e *kubeEnv) version(ctx context.Context) string {
	var v struct{ GitVersion string }
	if err := e.get(ctx, "/version", func(r *http.Response) error { return json.NewDecoder(r.Body).Decode(&v) }); err != nil {
		return "? (" + err.Error() + ")"
	}
	return v.GitVersion
}

// get GETs path as the admin and hands the response to read.
func (e *kubeEnv) get(ctx context.Context, path string, read func(*http.Response) error) error {
	req, err := http.NewRequestWithContext(ctx, "GET", e.srv.URL+path, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+kubetest.AdminToken)
	resp, err := e.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	return read(resp)
}

// dsn makes a namespace of its own for scope and returns the k8s:// DSN
// of it, with a kubeconfig of the admin (who may do anything).
func (e *kubeEnv) dsn(ctx context.Context, b *bench, scope string) (string, error) {
	ns, err := e.srv.CreateNamespace(ctx)
	if err != nil {
		return "", err
	}
	kc := b.tmpPath("kubeconfig-" + ns)
	if err := e.srv.WriteKubeconfig(kc, kubetest.AdminToken, ns); err != nil {
		return "", err
	}
	return "k8s://" + ns + "?kubeconfig=" + url.QueryEscape(kc), nil
}

// leaseLeft reads the Lease name in dsn's namespace and returns the time
// its spec gives it: renewTime + leaseDurationSeconds − now. The holder
// wrote renewTime on this host's clock, which is the one now reads.
// (leaderrun's store would judge a client-go Lease it first sees as held
// for a whole lease duration from then, as client-go's electors do.)
func (e *kubeEnv) leaseLeft(ctx context.Context, dsn, name string) (time.Duration, error) {
	ns, _ := dsnParts(dsn)
	var l struct {
		Spec struct {
			HolderIdentity       string
			RenewTime            time.Time
			LeaseDurationSeconds int
		}
	}
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	err := e.get(ctx, "/apis/coordination.k8s.io/v1/namespaces/"+ns+"/leases/"+name,
		func(r *http.Response) error { return json.NewDecoder(r.Body).Decode(&l) })
	switch {
	case err != nil:
		return 0, err
	case l.Spec.HolderIdentity == "" || l.Spec.RenewTime.IsZero():
		return 0, fmt.Errorf("lease %s/%s: no holder", ns, name)
	}
	return time.Until(l.Spec.RenewTime.Add(time.Duration(l.Spec.LeaseDurationSeconds) * time.Second)), nil
}

// dsnParts is the namespace and kubeconfig of a dsn made by kubeEnv.dsn.
func dsnParts(dsn string) (ns, kubeconfig string) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", ""
	}
	return u.Host, u.Query().Get("kubeconfig")
}

// maskedHow is how the masked replicas run, for the report.
const maskedHow = "each replica runs under `unshare --mount`, with a boot id of its own bind-mounted over " +
	"/proc/sys/kernel/random/boot_id (same pid, same everything else): followers see a holder on another boot, " +
	"as they would on another host, so the same-host fast path (samehost) never fires and every hand-over goes through the API server"

// kubeLeaderrun runs leaderrun replicas on the k8s:// store dsn at
// default timings; masked, each with a boot id of its own (maskedHow).
func (b *bench) kubeLeaderrun(label, lrBin, dsn string, masked bool) *contender {
	c := &contender{
		Label: label, Tool: "leaderrun", Store: "Kubernetes", TTL: defTTL, Period: defPeriod, DSN: dsn,
		StopHow: "SIGTERM to the leaderrun process (it stops its child, releases, exits)",
		standby: func(name string, p *proc, n int, timeout time.Duration) error {
			return p.waitMark(markStandby, timeout)
		},
		stopHolder: func(p *proc) { syscall.Kill(p.pid, syscall.SIGTERM) },
	}
	c.spawn = func(name, dir string, idx int) (*proc, error) {
		// Without a PID namespace, as when the section's figures were
		// measured; the identity tells the benchmark a child's replica.
		id := fmt.Sprintf("%s-r%d", name, idx)
		argv := []string{lrBin, "--name", name, "--store", dsn, "--identity", id, "--log-level", "info",
			"--pid-namespace=false", "--", b.childBin, "-dir", dir, "-mode", "hold", "-lock"}
		if masked {
			boot := filepath.Join(dir, fmt.Sprintf("boot_id-%d", idx))
			if err := os.WriteFile(boot, []byte(randomBootID()+"\n"), 0o644); err != nil {
				return nil, err
			}
			// unshare and sh exec: the replica keeps the pid the
			// benchmark started.
			argv = append([]string{"unshare", "--mount", "--", "sh", "-c",
				`mount --bind "$0" /proc/sys/kernel/random/boot_id && exec "$@"`, boot}, argv...)
		}
		p, err := b.procs.start(fmt.Sprintf("%s-%s-%d", label, name, idx), argv, nil, markStandby, markElected)
		if p != nil {
			p.identity = id
		}
		return p, err
	}
	return c
}

// kubeElector runs bench/kubeelector replicas (client-go's leader
// election) on the namespace and kubeconfig of dsn.
func (b *bench) kubeElector(elector, dsn string) *contender {
	ns, kc := dsnParts(dsn)
	return &contender{
		Label: kubeClientGoLabel, Tool: "client-go", Store: "Kubernetes", TTL: defTTL, Period: defPeriod,
		StopHow: "SIGTERM to the elector (it stops its command, then cancels: client-go releases the Lease)",
		spawn: func(name, dir string, idx int) (*proc, error) {
			argv := []string{elector, "-kubeconfig", kc, "-namespace", ns, "-name", name,
				"--", b.childBin, "-dir", dir, "-mode", "hold", "-lock"}
			return b.procs.start(fmt.Sprintf("%s-%s-%d", "client-go", name, idx), argv, nil, markStandby, markElected)
		},
		standby: func(name string, p *proc, n int, timeout time.Duration) error {
			return p.waitMark(markStandby, timeout)
		},
		stopHolder: func(p *proc) { syscall.Kill(p.pid, syscall.SIGTERM) },
	}
}

func randomBootID() string {
	var u [16]byte
	rand.Read(u[:])
	h := hex.EncodeToString(u[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// kubeLoad starts c's leader and two followers (none when c is nil),
// waits kubeSettle, and counts the API server's lease requests and watch
// events over window.
func (b *bench) kubeLoad(env *kubeEnv, label string, c *contender, window time.Duration) *kubeLoad {
	r := &kubeLoad{Label: label}
	if c != nil {
		dir, err := os.MkdirTemp(b.tmp, "kube-load-")
		if err != nil {
			r.Err = err.Error()
			return r
		}
		name := "bench-load"
		var ps []*proc
		defer func() {
			for _, p := range ps {
				syscall.Kill(p.pid, syscall.SIGTERM)
			}
			for _, p := range ps {
				if !p.wait(15 * time.Second) {
					p.killGroup(syscall.SIGKILL)
					p.wait(5 * time.Second)
				}
			}
		}()
		for i := range 3 {
			p, err := c.spawn(name, dir, i)
			if err != nil {
				r.Err = err.Error()
				return r
			}
			ps = append(ps, p)
			mark := markStandby
			if i == 0 {
				mark = markElected
			}
			if err := p.waitMark(mark, 60*time.Second); err != nil {
				r.Err = err.Error()
				return r
			}
		}
		b.sleep(kubeSettle)
	}
	var before, after map[string]float64
	var errBefore, errAfter error
	t0 := mono.Now()
	before, errBefore = env.leaseCounters(context.Background())
	b.sleep(window)
	after, errAfter = env.leaseCounters(context.Background())
	r.Window = mono.Since(t0)
	if err := firstErr(errBefore, errAfter); err != nil {
		r.Err = err.Error()
		return r
	}
	r.Requests = map[string]int64{}
	for k, v := range after {
		d := int64(v - before[k] + 0.5)
		switch {
		case d == 0:
		case k == watchEventsKey:
			r.WatchEvents = d
		default:
			r.Requests[k] = d
		}
	}
	return r
}

func firstErr(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// watchEventsKey is leaseCounters' key for the watch events.
const watchEventsKey = "watch events"

// leaseCounters reads the API server's /metrics: apiserver_request_total
// of resource leases, by verb (and code, when it is not 2xx), and
// apiserver_watch_events_total of leases under watchEventsKey.
func (e *kubeEnv) leaseCounters(ctx context.Context) (map[string]float64, error) {
	var ms []metric
	err := e.get(ctx, "/metrics", func(r *http.Response) error {
		var err error
		ms, err = parseMetrics(r.Body)
		return err
	})
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for _, m := range ms {
		if m.labels["resource"] != "leases" {
			continue
		}
		switch m.name {
		case "apiserver_request_total":
			k := m.labels["verb"]
			if code := m.labels["code"]; !strings.HasPrefix(code, "2") {
				k += " " + code
			}
			out[k] += m.value
		case "apiserver_watch_events_total":
			out[watchEventsKey] += m.value
		}
	}
	return out, nil
}
