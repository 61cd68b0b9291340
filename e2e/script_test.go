package e2e

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/leaderrun/leaderrun/cmd"
	"github.com/leaderrun/leaderrun/internal/testenv/citest"
	"github.com/leaderrun/leaderrun/internal/testenv/pgtest"
	"github.com/leaderrun/leaderrun/internal/testenv/tcpproxy"
	"github.com/leaderrun/leaderrun/lease"
	_ "github.com/leaderrun/leaderrun/lease/stores"
	"github.com/leaderrun/leaderrun/signals"
	"github.com/leaderrun/leaderrun/supervise"
)

// TestMain maps leaderrun and the helper child into the test binary, so the
// scripts run real leaderrun processes supervising real children, all in a
// cgroup of the test binary's own (inOwnCgroup).
func TestMain(m *testing.M) {
	testscript.Main(inOwnCgroup{m}, map[string]func(){
		"leaderrun": func() {
			// As main does, but first tell the script our pid.
			sigs := make(chan os.Signal, 16)
			signals.Notify(sigs)
			if f := os.Getenv("TEST_PIDFILE"); f != "" && !supervise.IsNamespaceInit() {
				writeFile(f, strconv.Itoa(os.Getpid()))
			}
			if f := os.Getenv("TEST_STDERR"); f != "" && !supervise.IsNamespaceInit() {
				redirectStderr(f)
			}
			os.Exit(cmdMain(sigs))
		},
		"lrchild":  childMain,
		"sigstart": sigstartMain,
	})
}

func TestScripts(t *testing.T) {
	pgDSN, pgErr := pgtest.DSN()
	if pgErr != nil && citest.InCI() {
		t.Fatal(pgErr) // CI must run the [postgres] scripts, not skip them
	}
	testscript.Run(t, scriptParams("../testdata/script", func(env *testscript.Env) error {
		env.Setenv("LEADERRUN_STORE", "sqlite:"+filepath.Join(env.WorkDir, "leases.db"))
		if pgErr == nil {
			dsn := pgSchema(env, pgDSN)
			env.Setenv("PGDSN", dsn)
			env.Setenv("PGDSN_WITH_PASSWORD", strings.Replace(dsn, "://postgres@", "://postgres:dsn-secret@", 1))
		}
		return nil
	}, pgErr == nil))
}

// pgSchema gives a script a schema of its own on the PostgreSQL server at
// dsn, dropped at the script's end, and returns the DSN that names it.
func pgSchema(env *testscript.Env, dsn string) string {
	schema := pgtest.RandomSchema()
	env.Defer(func() {
		if err := pgtest.DropSchema(dsn, schema); err != nil {
			env.T().Log(err)
		}
	})
	return pgtest.WithParam(dsn, "leaderrun_schema", schema)
}

// scriptParams are the scripts' parameters: the commands and conditions
// every script may use, and setup, which points the script at its store.
func scriptParams(dir string, setup func(*testscript.Env) error, postgres bool) testscript.Params {
	return testscript.Params{
		Dir:                 dir,
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		Setup: func(env *testscript.Env) error {
			// The scripts watch the command's processes by their
			// host pids: they run it without a PID namespace unless
			// they ask for one (the default's own scripts are in
			// testdata/orphans).
			env.Setenv("LEADERRUN_PID_NAMESPACE", "false")
			return setup(env)
		},
		Condition: func(cond string) (bool, error) {
			switch cond {
			case "postgres":
				return postgres, nil
			case "root":
				return rootCondition(), nil
			case "cgroup":
				// Whether leaderrun's commands get cgroups of their own.
				ok := supervise.ReclaimCgroups(nil)
				if !ok && citest.InCI() {
					return false, errors.New("cannot create cgroups here; CI must run the fast path's scripts (run CI as root)")
				}
				return ok, nil
			case "unshare":
				ok := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "true").Run() == nil
				if !ok && citest.InCI() {
					return false, errors.New("unshare --pid --fork --mount-proc is not permitted here; CI must run the PID 1 and namespace scripts (run CI as root)")
				}
				return ok, nil
			}
			return false, fmt.Errorf("unknown condition %q", cond)
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"waitfile":   cmdWaitFile,
			"waitgone":   cmdWaitGone,
			"sig":        cmdSig,
			"alive":      cmdAlive,
			"tokengt":    cmdTokenGT,
			"waitgrep":   cmdWaitGrep,
			"exitcode":   cmdExitCode,
			"steal":      cmdSteal,
			"storesql":   cmdStoreSQL,
			"proxy":      cmdProxy,
			"earlier":    cmdEarlier,
			"renewed":    cmdRenewed,
			"freeport":   cmdFreePort,
			"nsgone":     cmdNSGone,
			"sdsocket":   cmdSDSocket,
			"httpget":    cmdHTTPGet,
			"busy":       cmdBusy,
			"logspan":    cmdLogSpan,
			"escaped":    cmdEscaped,
			"mark":       cmdMark,
			"procenv":    cmdProcEnv,
			"ptyrun":     cmdPtyRun,
			"ptykey":     cmdPtyKey,
			"ptytype":    cmdPtyType,
			"waitstate":  cmdWaitState,
			"atspan":     cmdAtSpan,
			"running":    cmdRunning,
			"forgewhere": cmdForgeWhere,
			"reusepid":   cmdReusePid,
		},
	}
}

const waitLimit = 30 * time.Second

// waitfile FILE...: wait until each file exists and is not empty.
func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: waitfile FILE...")
	}
	for _, a := range args {
		path := ts.MkAbs(a)
		waitFor(ts, "file "+a, func() bool {
			fi, err := os.Stat(path)
			return err == nil && fi.Size() > 0
		})
	}
}

// waitgrep REGEXP FILE: wait until FILE has a line matching REGEXP.
func cmdWaitGrep(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: waitgrep REGEXP FILE")
	}
	re := regexp.MustCompile(args[0])
	path := ts.MkAbs(args[1])
	var data []byte
	waitFor(ts, fmt.Sprintf("%q in %s", args[0], args[1]), func() bool {
		data, _ = os.ReadFile(path)
		return re.Match(data)
	}, func() {
		// What the file held instead: a log that says what happened.
		if len(data) > 8<<10 {
			data = data[len(data)-8<<10:]
		}
		ts.Logf("%s ends:\n%s", args[1], data)
	})
}

// waitgone PIDFILE: wait until the process named in PIDFILE has exited.
func cmdWaitGone(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitgone PIDFILE")
	}
	pid := readPid(ts, args[0])
	waitFor(ts, fmt.Sprintf("pid %d to exit", pid), func() bool { return !processAlive(pid) })
}

// alive PIDFILE: the process named in PIDFILE is running (not a zombie).
func cmdAlive(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 1 {
		ts.Fatalf("usage: [!] alive PIDFILE")
	}
	pid := readPid(ts, args[0])
	if got := processAlive(pid); got == neg {
		stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		ts.Fatalf("pid %d alive = %v, want %v (stat: %s)", pid, got, !neg, stat)
	}
}

// sig SIGNAL PIDFILE: send SIGNAL to the process named in PIDFILE.
func cmdSig(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: sig SIGNAL PIDFILE")
	}
	sig, err := signals.Parse(args[0])
	ts.Check(err)
	ts.Check(syscall.Kill(readPid(ts, args[1]), sig))
}

// tokengt A B: the token recorded in file B is greater than the one in A.
func cmdTokenGT(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: tokengt FILE_A FILE_B")
	}
	a, b := readToken(ts, args[0]), readToken(ts, args[1])
	if b <= a {
		ts.Fatalf("token in %s is %d, want > %d (token in %s)", args[1], b, a, args[0])
	}
}

// waitFor polls ok until it holds, or fails the script after waitLimit,
// first calling onTimeout (to log what was seen instead).
func waitFor(ts *testscript.TestScript, what string, ok func() bool, onTimeout ...func()) {
	deadline := time.Now().Add(waitLimit)
	for !ok() {
		if time.Now().After(deadline) {
			for _, f := range onTimeout {
				f()
			}
			ts.Fatalf("timed out after %v waiting for %s", waitLimit, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// readPid reads the pid that is the first field of a file.
func readPid(ts *testscript.TestScript, file string) int {
	data, err := os.ReadFile(ts.MkAbs(file))
	ts.Check(err)
	fields := strings.Fields(string(data))
	if len(fields) == 0 {
		ts.Fatalf("%s is empty", file)
	}
	pid, err := strconv.Atoi(fields[0])
	ts.Check(err)
	if pid <= 1 {
		// A pid written inside a PID namespace: signalling it here
		// would hit init or every process.
		ts.Fatalf("%s names pid %d", file, pid)
	}
	return pid
}

// readToken reads the token field ("token=N") of a child's ready file.
func readToken(ts *testscript.TestScript, file string) int64 { return readField(ts, file, "token") }

// readField reads the integer field "key=N" of a file.
func readField(ts *testscript.TestScript, file, key string) int64 {
	data, err := os.ReadFile(ts.MkAbs(file))
	ts.Check(err)
	for _, f := range strings.Fields(string(data)) {
		if v, ok := strings.CutPrefix(f, key+"="); ok {
			n, err := strconv.ParseInt(v, 10, 64)
			ts.Check(err)
			return n
		}
	}
	ts.Fatalf("no %s= in %s", key, file)
	return 0
}

// processAlive reports whether pid runs and is not a zombie.
func processAlive(pid int) bool {
	if syscall.Kill(pid, 0) != nil {
		return false
	}
	f, err := os.Open(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	if i := strings.LastIndexByte(line, ')'); i >= 0 && len(line) > i+2 {
		return line[i+2] != 'Z'
	}
	return true
}

// writeFile writes data atomically, so a waiter never sees half of it.
func writeFile(path, data string) {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data+"\n"), 0o644); err == nil {
		os.Rename(tmp, path)
	}
}

func cmdMain(sigs chan os.Signal) int { return cmd.Main(sigs, os.Args, os.Stdout, os.Stderr) }

// redirectStderr sends this process's stderr to a file the script can wait
// on while the process still runs.
func redirectStderr(path string) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	syscall.Dup2(int(f.Fd()), 2)
	os.Stderr = f
}

// exitcode CODE PROG ARGS...: run PROG and check its exit code; a death by
// signal N counts as 128+N, as a shell reports it.
func cmdExitCode(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exitcode CODE PROG [ARG...]")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	got := 0
	err = ts.Exec(args[1], args[2:]...)
	// Keep the command's output for stdout and stderr checks that follow.
	fmt.Fprint(ts.Stdout(), ts.ReadFile("stdout"))
	fmt.Fprint(ts.Stderr(), ts.ReadFile("stderr"))
	if err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			ts.Fatalf("%s: %v", args[1], err)
		}
		ws := exit.Sys().(syscall.WaitStatus)
		got = ws.ExitStatus()
		if ws.Signaled() {
			got = 128 + int(ws.Signal())
		}
	}
	if got != want {
		ts.Fatalf("%s exited with %d, want %d", args[1], got, want)
	}
}

// steal NAME: take NAME from its holder behind leaderrun's back, as a
// thief that declares the holder dead would: the store grants it to
// "thief" under a new token while the holder's lease has not expired, and
// the holder's next renewal finds it lost.
func cmdSteal(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: steal NAME")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	store, err := lease.Open(ctx, ts.Getenv("LEADERRUN_STORE"))
	ts.Check(err)
	defer store.Close()
	rec, err := store.Get(ctx, args[0])
	ts.Check(err)
	if !rec.Held() {
		ts.Fatalf("no lease %q held to steal: %+v", args[0], rec)
	}
	// The thief's lease ends about when the holder's would have.
	_, err = store.Seize(ctx, args[0], "thief", rec, max(rec.Remaining, time.Second))
	ts.Check(err)
}

// storesql STATEMENT: run an SQL statement in the store that
// $LEADERRUN_STORE names, behind leaderrun's back, as an operator or an
// attacker with access to the store might.
func cmdStoreSQL(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: storesql STATEMENT")
	}
	storeExec(ts, args[0])
}

// storeExec runs query in the SQLite or PostgreSQL store of
// $LEADERRUN_STORE and returns how many rows it affected.
func storeExec(ts *testscript.TestScript, query string) int64 {
	dsn := ts.Getenv("LEADERRUN_STORE")
	switch {
	case strings.HasPrefix(dsn, "sqlite:"):
		db, err := sql.Open("sqlite", strings.TrimPrefix(dsn, "sqlite:"))
		ts.Check(err)
		defer db.Close()
		res, err := db.Exec(query)
		ts.Check(err)
		n, _ := res.RowsAffected()
		return n
	case strings.HasPrefix(dsn, "postgres"):
		n, err := pgtest.Exec(dsn, query)
		ts.Check(err)
		return n
	}
	ts.Fatalf("no way to run SQL in %s", dsn)
	return 0
}

// proxy start NAME [DSN]: start a TCP proxy to each server of the store
// DSN (default $LEADERRUN_STORE; a networked store) and set $NAME_DSN to
// the DSN through them. proxy NAME pass|reset|blackhole: change what they
// do with the connections they carry.
func cmdProxy(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 || (args[0] == "start" && len(args) > 3) || (args[0] != "start" && len(args) != 2) {
		ts.Fatalf("usage: proxy start NAME [DSN] | proxy NAME pass|reset|blackhole")
	}
	if args[0] == "start" {
		dsn := ts.Getenv("LEADERRUN_STORE")
		if len(args) == 3 {
			dsn = args[2]
		}
		u, err := url.Parse(dsn)
		if err != nil || u.Host == "" {
			ts.Fatalf("proxy: %s is not a networked store's URL", dsn)
		}
		var ps []*tcpproxy.Proxy
		var addrs []string
		for _, addr := range strings.Split(u.Host, ",") {
			p, err := tcpproxy.New(addr)
			ts.Check(err)
			ts.Defer(func() { p.Close() })
			ps = append(ps, p)
			addrs = append(addrs, p.Addr())
		}
		proxies.Store(ts, args[1], ps)
		u.Host = strings.Join(addrs, ",")
		ts.Setenv(args[1]+"_DSN", u.String())
		return
	}
	for _, p := range proxies.Load(ts, args[0]) {
		switch args[1] {
		case "pass":
			p.Pass()
		case "reset":
			p.Reset()
		case "blackhole":
			p.Blackhole()
		default:
			ts.Fatalf("unknown proxy mode %q", args[1])
		}
	}
}

// proxies holds each script's proxies by name.
var proxies = table[[]*tcpproxy.Proxy]{}

// table holds what each script started, by name, until the script ends.
type table[T any] struct {
	mu sync.Mutex // guards m
	m  map[*testscript.TestScript]map[string]T
}

func (t *table[T]) Store(ts *testscript.TestScript, name string, v T) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m == nil {
		t.m = make(map[*testscript.TestScript]map[string]T)
	}
	if t.m[ts] == nil {
		t.m[ts] = make(map[string]T)
		ts.Defer(func() {
			t.mu.Lock()
			defer t.mu.Unlock()
			delete(t.m, ts)
		})
	}
	t.m[ts][name] = v
}

func (t *table[T]) Load(ts *testscript.TestScript, name string) T {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.m[ts][name]
	if !ok {
		ts.Fatalf("no %q started in this script", name)
	}
	return v
}

// earlier A B: the time (at=UNIXNANO) recorded in file A is before the one
// in file B, as a child records its start in its ready file and its exit
// in its exit file.
func cmdEarlier(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: earlier FILE_A FILE_B")
	}
	a, b := readField(ts, args[0], "at"), readField(ts, args[1], "at")
	if a >= b {
		ts.Fatalf("%s (at=%d) is not earlier than %s (at=%d): by %v", args[0], a, args[1], b, time.Duration(a-b))
	}
	ts.Logf("%s is %v before %s", args[0], time.Duration(b-a), args[1])
}

// freeport VAR: set VAR to 127.0.0.1:PORT with a port free right now.
func cmdFreePort(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: freeport VAR")
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	ts.Check(err)
	ts.Setenv(args[0], l.Addr().String())
	l.Close()
}

// httpget CODE URL [REGEXP]: GET URL, check the status code; the body
// becomes stdout. With REGEXP, GET again until the body matches it.
func cmdHTTPGet(ts *testscript.TestScript, neg bool, args []string) {
	if neg || (len(args) != 2 && len(args) != 3) {
		ts.Fatalf("usage: httpget CODE URL [REGEXP]")
	}
	want, err := strconv.Atoi(args[0])
	ts.Check(err)
	var re *regexp.Regexp
	if len(args) == 3 {
		re = regexp.MustCompile(args[2])
	}
	client := &http.Client{Timeout: 10 * time.Second}
	var body []byte
	waitFor(ts, fmt.Sprintf("GET %s to answer %d", args[1], want), func() bool {
		resp, err := client.Get(args[1])
		ts.Check(err)
		defer resp.Body.Close()
		body, err = io.ReadAll(resp.Body)
		ts.Check(err)
		if resp.StatusCode != want {
			ts.Fatalf("GET %s: %s, want %d; body: %s", args[1], resp.Status, want, body)
		}
		return re == nil || re.Match(body)
	})
	ts.Stdout().Write(body)
}

// nsgone READYFILE: wait until no process is left in the PID namespace that
// the child's ready file names (pidns=pid:[N]).
func cmdNSGone(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: nsgone READYFILE")
	}
	var ns string
	for _, f := range strings.Fields(ts.ReadFile(args[0])) {
		if v, ok := strings.CutPrefix(f, "pidns="); ok {
			ns = v
		}
	}
	if ns == "" {
		ts.Fatalf("no pidns= in %s", args[0])
	}
	waitFor(ts, "every process of "+ns+" to exit", func() bool {
		procs, _ := filepath.Glob("/proc/[0-9]*/ns/pid")
		for _, p := range procs {
			if link, err := os.Readlink(p); err == nil && link == ns {
				if pid, err := strconv.Atoi(strings.Split(p, "/")[2]); err == nil && processAlive(pid) {
					return false
				}
			}
		}
		return true
	})
}

// sdsocket SOCKET FILE: listen on a unixgram socket, as systemd does for
// Type=notify services, and append every datagram received to FILE (one
// line per field) until the script ends.
func cmdSDSocket(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: sdsocket SOCKET FILE")
	}
	conn, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: ts.MkAbs(args[0]), Net: "unixgram"})
	ts.Check(err)
	out := ts.MkAbs(args[1])
	done := make(chan struct{})
	ts.Defer(func() { conn.Close(); <-done })
	go func() {
		defer close(done)
		buf := make([]byte, 4096)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			appendLine(out, string(buf[:n]))
		}
	}()
}
