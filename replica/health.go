package replica

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/leaderrun/leaderrun/config"
	"github.com/leaderrun/leaderrun/elect"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/supervise"
)

// The command's health (--health-cmd, DESIGN §13). While the leader's
// command runs, a checker runs the check every interval; after retries
// failures in a row the command is unhealthy. The leader then says that it
// is not to be preferred for the cooldown (its candidacy in the store) and
// hands the name over to the best live, eligible candidate through the
// ordered graceful hand-over: a step-down request for that successor,
// which ends the tenure at once (elect's noticeStepDown), so that the
// command stops, then the name is released, then the successor starts.
// With no such candidate it keeps the name's command alive instead: the
// command is stopped and started again as after a crash, with the restart
// back-off. The name is never left without a command because every
// replica is unhealthy.

// maxCheckOutput bounds what is kept of a check's output (stdout and
// stderr together): its first bytes, as Docker keeps them.
const maxCheckOutput = 4096

// checkResult is one run of the health check.
type checkResult struct {
	ok     bool
	why    string // how it ended: "exit status 1", "timed out after 5s", "could not start: …"
	output string // its first maxCheckOutput bytes of output, raw
	more   int64  // bytes of output beyond those
}

// shownOutput is r's output for a log line, status or watch: escaped
// (quoted as Go quotes strings: control characters, invalid UTF-8 and
// terminal escapes come out as \n, \x1b, …) and bounded, with what was
// left out counted.
func (r checkResult) shownOutput() string {
	s := strconv.Quote(strings.TrimRight(r.output, "\n"))
	if r.more > 0 {
		s += fmt.Sprintf(" (and %d more bytes)", r.more)
	}
	return s
}

// outputAttrs are r's output for a log line: the handler escapes it (text
// quotes what is not printable, JSON escapes it), and the bytes beyond
// those kept are counted.
func (r checkResult) outputAttrs() []any {
	attrs := []any{"output", strings.TrimRight(r.output, "\n")}
	if r.more > 0 {
		attrs = append(attrs, "output_bytes_left_out", r.more)
	}
	return attrs
}

// checker runs the checks of one command's life and says when the command
// became unhealthy.
type checker struct {
	cfg config.Health
	// run runs one check, bounded by cfg.Timeout (runCheck, or a fake).
	run func(ctx context.Context) checkResult
	// observe hears of every check that ran to its end.
	observe func(checkResult)
}

// watch waits the start period, then runs a check an interval after the
// previous one ended (the first an interval after the start period), and
// returns the last failed check once retries of them failed in a row. It
// returns false when ctx ends first.
func (c *checker) watch(ctx context.Context) (checkResult, bool) {
	if !sleepCtx(ctx, c.cfg.StartPeriod) {
		return checkResult{}, false
	}
	failures := 0
	for {
		if !sleepCtx(ctx, c.cfg.Interval) {
			return checkResult{}, false
		}
		res := c.run(ctx)
		if ctx.Err() != nil {
			return checkResult{}, false // the tenure or the command ended: not the check's fault
		}
		if c.observe != nil {
			c.observe(res)
		}
		if res.ok {
			failures = 0
			continue
		}
		if failures++; failures >= c.cfg.Retries {
			return res, true
		}
	}
}

// sleepCtx waits d, and reports false when ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// checkShell runs the check's command line, as Docker's CMD-SHELL does.
const checkShell = "/bin/sh"

// runCheck runs cmd with /bin/sh -c and env in a process group (and,
// where it can, a cgroup) of its own, through package supervise, which
// owns every child of this process. A check that outlives timeout fails,
// and its whole tree is killed. A check that cannot be started fails,
// saying why.
func runCheck(ctx context.Context, cmd string, env []string, timeout time.Duration, log *slog.Logger) checkResult {
	return runShell(ctx, checkShell, cmd, env, timeout, log)
}

// runShell is runCheck with shell in place of /bin/sh.
func runShell(ctx context.Context, shell, cmd string, env []string, timeout time.Duration, log *slog.Logger) checkResult {
	pr, pw, err := os.Pipe()
	if err != nil {
		return checkResult{why: "could not start: " + err.Error()}
	}
	defer pr.Close()
	null, err := os.Open(os.DevNull)
	if err != nil {
		pw.Close()
		return checkResult{why: "could not start: " + err.Error()}
	}
	defer null.Close()
	c, err := supervise.Start(supervise.Spec{
		Path: shell, Args: []string{shell, "-c", cmd}, Env: env,
		Stdin: null, Stdout: pw, Stderr: pw,
		StopSignal: syscall.SIGKILL, KillGrace: time.Second,
		Logger: slog.New(warnOnly{log.Handler()}),
		// Not a proof: what dead leaderrun processes left in their
		// cgroups is the next command's start to reclaim, not every
		// check's (it reads the cgroup tree).
		Proved: true,
	})
	pw.Close()
	if err != nil {
		return checkResult{why: "could not start: " + err.Error()}
	}
	out := make(chan checkResult, 1)
	go func() { out <- readBounded(pr) }()
	res := checkResult{}
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-c.Done():
		st := c.Stop() // what it left in its group or cgroup
		res.ok, res.why = st.ExitCode() == 0, st.String()
	case <-t.C:
		c.Stop()
		res.why = fmt.Sprintf("timed out after %v", timeout)
	case <-ctx.Done():
		c.Stop()
		res.why = "interrupted"
	}
	// Whatever escaped the group and still holds the pipe does not hold
	// the check up.
	pr.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	o := <-out
	res.output, res.more = o.output, o.more
	return res
}

// readBounded reads r to its end (or a read error) and keeps its first
// maxCheckOutput bytes, counting the rest: a check that prints megabytes
// is drained, not kept.
func readBounded(r io.Reader) checkResult {
	buf := make([]byte, 0, 512)
	var more int64
	chunk := make([]byte, 32<<10)
	for {
		n, err := r.Read(chunk)
		keep := min(n, maxCheckOutput-len(buf))
		buf = append(buf, chunk[:keep]...)
		more += int64(n - keep)
		if err != nil {
			return checkResult{output: string(buf), more: more}
		}
	}
}

// warnOnly passes on the warnings and errors of package supervise about a
// check, not its every start and stop.
type warnOnly struct{ slog.Handler }

func (h warnOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}
func (h warnOnly) WithAttrs(a []slog.Attr) slog.Handler { return warnOnly{h.Handler.WithAttrs(a)} }
func (h warnOnly) WithGroup(n string) slog.Handler      { return warnOnly{h.Handler.WithGroup(n)} }

var _ candidacy = (*elect.Elector)(nil)

// candidacy is what the health check uses of the election (an
// *elect.Elector): to say that this replica is not to be preferred, and
// to find whom to hand the name over to.
type candidacy interface {
	SetIneligible(ctx context.Context, d time.Duration, note string) error
	Successor(ctx context.Context) (lease.Standing, bool, error)
}

// healthCallTimeout bounds each store call of the verdict.
const healthCallTimeout = 5 * time.Second

// healthVerdict is what became of an unhealthy command.
type healthVerdict int

const (
	healthy    healthVerdict = iota // the checks passed, or the command ended first
	handedOver                      // a successor was asked to take the name over
	restarting                      // no eligible successor: the command is to stop, and start again
)

// guardHealth runs the health check of the tenure's command until ctx
// ends (the command ended, or the tenure did) or the command is unhealthy,
// and then acts on it (see the top of this file). token is the tenure's,
// for the note; el and store are the election's.
func (s *single) guardHealth(ctx context.Context, token int64, env []string, el candidacy, store lease.Store, log *slog.Logger) healthVerdict {
	h := s.cfg.Health
	ck := &checker{cfg: h,
		run: func(ctx context.Context) checkResult { return s.check(ctx, h.Cmd, env, h.Timeout, log) },
		observe: func(r checkResult) {
			s.report.obs.HealthCheck(r.ok)
			if !r.ok {
				log.Info("health check failed", append([]any{"check", r.why}, r.outputAttrs()...)...)
			}
		},
	}
	res, unhealthy := ck.watch(ctx)
	if !unhealthy {
		return healthy
	}
	return s.unhealthy(ctx, token, res, el, store, log)
}

// unhealthy hands the name over to the best live, eligible candidate, or,
// with none, returns restarting: serve then stops the command, and the
// loop restarts it.
func (s *single) unhealthy(ctx context.Context, token int64, res checkResult, el candidacy, store lease.Store, log *slog.Logger) healthVerdict {
	h := s.cfg.Health
	note := boundNote(fmt.Sprintf("token %d: command unhealthy after %d failed checks (%s): %s", token, h.Retries, res.why, res.shownOutput()))
	call := func(f func(context.Context) error) error {
		cctx, cancel := context.WithTimeout(ctx, healthCallTimeout)
		defer cancel()
		return f(cctx)
	}
	if err := call(func(ctx context.Context) error { return el.SetIneligible(ctx, h.Cooldown, note) }); err != nil {
		log.Warn("cannot record in the store that this replica is ineligible", "err", err)
	}
	var succ lease.Standing
	var found bool
	err := call(func(ctx context.Context) (err error) { succ, found, err = el.Successor(ctx); return err })
	switch {
	case ctx.Err() != nil:
		return healthy // the tenure or the command ended meanwhile
	case err != nil:
		log.Warn("cannot read the other candidates; keeping the name", "err", err)
	case found:
		window := s.cfg.LeaseDuration
		log.Warn("command unhealthy; handing the name over", append([]any{"successor", succ.Holder, "successor_priority", succ.Priority,
			"failed_checks", h.Retries, "check", res.why, "ineligible_for", h.Cooldown}, res.outputAttrs()...)...)
		err := call(func(ctx context.Context) error {
			_, err := store.RequestStepDown(ctx, s.cfg.Name, succ.Holder, window)
			return err
		})
		if err == nil {
			s.report.obs.HealthHandover()
			return handedOver // the tenure ends at the request: stop, release, the successor starts
		}
		if ctx.Err() != nil {
			return healthy
		}
		log.Warn("cannot hand the name over; restarting the command instead", "successor", succ.Holder, "err", err)
	}
	// Nobody better: this replica stays eligible, so that a standby
	// that takes the name while the command restarts defers to it (the
	// others are ineligible or gone).
	if err := call(func(ctx context.Context) error { return el.SetIneligible(ctx, 0, "") }); err != nil && ctx.Err() == nil {
		log.Warn("cannot record in the store that this replica is eligible again", "err", err)
	}
	if ctx.Err() != nil {
		return healthy
	}
	log.Warn("command unhealthy; every other replica is unavailable or ineligible, so this one keeps the name and restarts its command",
		append([]any{"failed_checks", h.Retries, "check", res.why}, res.outputAttrs()...)...)
	s.report.obs.HealthRestart()
	return restarting
}

// boundNote makes s a candidacy's note (lease.MaxNote): printable, and
// cut at a rune boundary.
func boundNote(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || !unicode.IsPrint(r) {
			return '?'
		}
		return r
	}, s)
	if len(s) <= lease.MaxNote {
		return s
	}
	n := lease.MaxNote - len("…")
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

// tenureHealth is the health check of one tenure's command: started with
// the command, ended once serve returned.
type tenureHealth struct {
	s      *single
	ten    tenureInfo
	env    []string
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	done   chan healthVerdict // nil until start
	// restart is closed when the command is unhealthy and no other
	// replica can take the name over: serve stops it (nil without a
	// check, which never closes).
	restart chan struct{}
}

// tenureInfo is what the health check needs of a tenure.
type tenureInfo interface {
	Token() int64
	Context() context.Context
}

// healthGuard returns the health check of ten's command (a no-op without
// --health-cmd).
func (s *single) healthGuard(ten tenureInfo, env []string, log *slog.Logger) *tenureHealth {
	h := &tenureHealth{s: s, ten: ten, env: env, log: log}
	if s.cfg.Health.Cmd != "" {
		h.ctx, h.cancel = context.WithCancel(ten.Context())
		h.restart = make(chan struct{})
	}
	return h
}

// start runs the check of the command, which has just started, on a
// goroutine of its own that ends with end.
func (h *tenureHealth) start() {
	if h.ctx == nil {
		return
	}
	h.done = make(chan healthVerdict, 1)
	el := h.s.elector
	go func() {
		v := h.s.guardHealth(h.ctx, h.ten.Token(), h.env, el, el.Store, h.log)
		if v == restarting {
			close(h.restart)
		}
		h.done <- v
	}()
}

// end stops the check, once the command is dead, and returns what it did.
func (h *tenureHealth) end() healthVerdict {
	if h.ctx == nil {
		return healthy
	}
	h.cancel()
	if h.done == nil {
		return healthy
	}
	return <-h.done
}
