package main

import (
	"fmt"
	"syscall"
	"time"
)

// Markers leaderrun logs, used to know when a replica is standing by.
const (
	markStandby = "standing by"
	markElected = "elected"
)

// leaderrunContender runs leaderrun replicas on the store dsn with extra
// timing flags, in leaderrun's default mode (the command in a PID
// namespace of its own). Replica idx of name has the identity name-rIDX,
// by which the benchmark tells which replica runs a child (replicaOf).
func (b *bench) leaderrunContender(label, store, dsn string, ttl, period time.Duration, timing ...string) *contender {
	c := &contender{
		Label: label, Tool: "leaderrun", Store: store, TTL: ttl, Period: period, DSN: dsn,
		StopHow:    "SIGTERM to the leaderrun process (it stops its child, releases, exits)",
		stopHolder: func(p *proc) { syscall.Kill(p.pid, syscall.SIGTERM) },
		standby: func(name string, p *proc, n int, timeout time.Duration) error {
			return p.waitMark(markStandby, timeout)
		},
	}
	c.spawn = func(name, dir string, idx int) (*proc, error) {
		id := fmt.Sprintf("%s-r%d", name, idx)
		argv := []string{b.lrBin, "--name", name, "--store", dsn, "--identity", id, "--log-level", "info"}
		if c.NoPIDNamespace {
			argv = append(argv, "--pid-namespace=false")
		}
		argv = append(argv, timing...)
		argv = append(argv, "--", b.childBin, "-dir", dir, "-mode", "hold", "-lock")
		p, err := b.procs.start(fmt.Sprintf("%s-%s-%d", label, name, idx), argv, nil, markStandby, markElected)
		if p != nil {
			p.identity = id
		}
		return p, err
	}
	return c
}

// withoutPIDNamespace makes c's replicas run with --pid-namespace=false,
// the baseline of the namespace's cost, and says so in its label.
func withoutPIDNamespace(c *contender) *contender {
	c.NoPIDNamespace = true
	c.Label += noNSSuffix
	return c
}

// noNSSuffix ends the label of a leaderrun contender run with
// --pid-namespace=false.
const noNSSuffix = " (--pid-namespace=false)"

// replicaOf returns the replica of live that runs the child that wrote m:
// by its identity, which the child finds in LEADERRUN_HOLDER, or, for a
// tool that sets none (etcdctl lock, which runs its child itself), by the
// child's parent pid.
func replicaOf(m mark, live map[int]*proc) *proc {
	if m.Holder == "" {
		return live[m.Ppid]
	}
	for _, p := range live {
		if p.identity == m.Holder {
			return p
		}
	}
	return nil
}

// etcdContender runs `etcdctl lock --ttl` replicas against e.
func (b *bench) etcdContender(label string, e *etcdServer, ttl time.Duration) *contender {
	return &contender{
		Label: label, Tool: "etcdctl lock", Store: "etcd", TTL: ttl, Period: ttl / 3,
		StopHow: "SIGTERM to the etcdctl process group (etcdctl does not stop its child on SIGTERM; see below)",
		spawn: func(name, dir string, idx int) (*proc, error) {
			argv := []string{b.etcdctl, "--endpoints", e.endpointList(), "lock",
				fmt.Sprintf("--ttl=%d", int(ttl.Seconds())), name,
				"--", b.childBin, "-dir", dir, "-mode", "hold", "-lock"}
			return b.procs.start(fmt.Sprintf("%s-%s-%d", label, name, idx), argv, nil)
		},
		standby: func(name string, p *proc, n int, timeout time.Duration) error {
			// Every waiting etcdctl lock has created its key under name/.
			deadline := time.Now().Add(timeout)
			for time.Now().Before(deadline) {
				if p.exited() {
					return fmt.Errorf("%s exited", p.label)
				}
				if got, err := e.count(name + "/"); err == nil && got >= n {
					return nil
				}
				time.Sleep(20 * time.Millisecond)
			}
			return fmt.Errorf("%s: %d lock keys not seen within %v", p.label, n, timeout)
		},
		stopHolder: func(p *proc) { p.killGroup(syscall.SIGTERM) },
	}
}
