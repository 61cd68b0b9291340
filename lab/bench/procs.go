package main

import (
	"bufio"
	"fmt"
	"io"
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

// proc is one process the benchmark started, in a process group of its own.
// Its standard output and error go to a log file; lines containing one of
// the markers given at spawn close that marker's channel.
type proc struct {
	label  string
	cmd    *exec.Cmd
	pid    int
	done   chan struct{} // closed once the process has been reaped
	exitAt int64         // CLOCK_MONOTONIC when reaped; valid after done
	marks  map[string]chan struct{}
	// identity is a leaderrun replica's --identity, which its child finds
	// in LEADERRUN_HOLDER; "" for other processes.
	identity string
}

// procs tracks every process the benchmark started, so that cleanup can
// kill what is left.
type procs struct {
	logDir string

	mu       sync.Mutex // guards all and children
	all      []*proc
	children map[int]bool // benchchild pids seen in marks
	childBin string
}

func newProcs(logDir, childBin string) *procs {
	return &procs{logDir: logDir, childBin: childBin, children: map[int]bool{}}
}

// start runs argv in a new process group. markers are substrings of output
// lines to wait for with waitMark.
func (ps *procs) start(label string, argv []string, env []string, markers ...string) (*proc, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if env != nil {
		cmd.Env = env
	}
	logf, err := os.OpenFile(filepath.Join(ps.logDir, sanitize(label)+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		logf.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = pw, pw
	p := &proc{label: label, cmd: cmd, done: make(chan struct{}), marks: map[string]chan struct{}{}}
	for _, m := range markers {
		p.marks[m] = make(chan struct{})
	}
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", label, err)
	}
	pw.Close()
	p.pid = cmd.Process.Pid
	ps.mu.Lock()
	ps.all = append(ps.all, p)
	ps.mu.Unlock()
	go p.scan(pr, logf)
	go func() {
		cmd.Wait()
		p.exitAt = mono.Now()
		close(p.done)
	}()
	return p, nil
}

func (p *proc) scan(r io.ReadCloser, logf *os.File) {
	defer r.Close()
	defer logf.Close()
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		fmt.Fprintln(logf, line)
		for m, ch := range p.marks {
			if strings.Contains(line, m) {
				select {
				case <-ch:
				default:
					close(ch)
				}
			}
		}
	}
}

// waitMark waits up to timeout for a line containing marker.
func (p *proc) waitMark(marker string, timeout time.Duration) error {
	ch, ok := p.marks[marker]
	if !ok {
		return fmt.Errorf("%s: marker %q not registered", p.label, marker)
	}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-ch:
		return nil
	case <-p.done:
		select {
		case <-ch:
			return nil
		default:
		}
		return fmt.Errorf("%s exited (%v) before logging %q", p.label, p.cmd.ProcessState, marker)
	case <-t.C:
		return fmt.Errorf("%s: no %q within %v", p.label, marker, timeout)
	}
}

// wait waits up to timeout for the process to exit.
func (p *proc) wait(timeout time.Duration) bool {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-p.done:
		return true
	case <-t.C:
		return false
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// killGroup sends sig to p's process group (pgid == pid, > 1 by
// construction) and to p itself.
func (p *proc) killGroup(sig syscall.Signal) {
	if p.pid > 1 {
		syscall.Kill(-p.pid, sig)
	}
}

// noteChild remembers a benchchild pid, so cleanup can kill it if it is
// still alive (an orphan of a SIGKILLed etcdctl, for example).
func (ps *procs) noteChild(pid int) {
	if pid <= 0 {
		return
	}
	ps.mu.Lock()
	ps.children[pid] = true
	ps.mu.Unlock()
}

// stopAll kills every process group still running, then every benchchild
// that is still alive, and waits (bounded) for the reaping.
func (ps *procs) stopAll() {
	ps.mu.Lock()
	all := append([]*proc(nil), ps.all...)
	children := make([]int, 0, len(ps.children))
	for pid := range ps.children {
		children = append(children, pid)
	}
	ps.mu.Unlock()
	for _, p := range all {
		if !p.exited() {
			p.killGroup(syscall.SIGKILL)
		}
	}
	for _, pid := range children {
		if isChildAlive(pid, ps.childBin) {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, p := range all {
		p.wait(time.Until(deadline))
	}
}

// isChildAlive reports whether pid is a live (not zombie) benchchild.
func isChildAlive(pid int, childBin string) bool {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil || exe != childBin {
		return false
	}
	return procState(pid) != "Z"
}

// hostPid returns the pid, in the benchmark's PID namespace, of the child
// that wrote m, or 0 when no such process runs. A child in a PID namespace
// of its own (leaderrun's default) records its pid there, 2 as a rule: it
// is the process in that namespace (by its inode) whose innermost pid (the
// last of NSpid in /proc/PID/status) is that one. Call it while the child
// runs, after any measurement: it reads every process's namespace.
func hostPid(m mark) int {
	if m.PidNS == 0 || m.PidNS == pidNamespace("self") {
		return m.Pid
	}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pidNamespace(e.Name()) != m.PidNS {
			continue
		}
		if f, err := statusFields(pid, "NSpid"); err == nil && f[len(f)-1] == strconv.Itoa(m.Pid) {
			return pid
		}
	}
	return 0
}

// pidNamespace is the inode of the PID namespace of the process named pid
// under /proc ("self", "123"), 0 if it is gone.
func pidNamespace(pid string) uint64 {
	var st syscall.Stat_t
	if syscall.Stat("/proc/"+pid+"/ns/pid", &st) != nil {
		return 0
	}
	return st.Ino
}

// pidAlive reports whether pid exists and is not a zombie.
func pidAlive(pid int) bool {
	s := procState(pid)
	return s != "" && s != "Z" && s != "X"
}

// procState is the state letter from /proc/PID/stat, or "" if none.
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 || i+2 >= len(b) {
		return ""
	}
	return string(b[i+2])
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_', r == '.':
			return r
		}
		return '_'
	}, s)
}

// stopAll sends SIGTERM to every process group of ps at once, then waits
// up to grace for each, SIGKILLing one that is still there.
func stopAll(ps []*proc, grace time.Duration) {
	for _, p := range ps {
		p.killGroup(syscall.SIGTERM)
	}
	for _, p := range ps {
		if !p.wait(grace) {
			p.killGroup(syscall.SIGKILL)
			p.wait(5 * time.Second)
		}
	}
}
