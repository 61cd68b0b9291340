package e2e

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestJudge runs the scripts of testdata/judge once per store. In each, a
// child and its escaped grandchild hold an flock that the next leader's
// child must take without waiting: the kernel, not a timestamp, judges
// whether the old tree was dead before the new child started.
func TestJudge(t *testing.T) { runPerStore(t, "../testdata/judge") }

// busy N: keep N goroutines spinning until the script ends, as load from
// other processes on a small machine would.
func cmdBusy(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: busy N")
	}
	n, err := strconv.Atoi(args[0])
	ts.Check(err)
	stop := make(chan struct{})
	for range n {
		go func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
	}
	ts.Defer(func() { close(stop) })
}

// logspan FILE1 REGEXP1 FILE2 REGEXP2 MIN [MAX]: the time= of the last line
// of FILE2 matching REGEXP2 is at least MIN (and at most MAX) after that of
// the first line of FILE1 matching REGEXP1. The files are leaderrun logs
// (text format) of processes on this host.
func cmdLogSpan(ts *testscript.TestScript, neg bool, args []string) {
	if neg || (len(args) != 5 && len(args) != 6) {
		ts.Fatalf("usage: logspan FILE1 REGEXP1 FILE2 REGEXP2 MIN [MAX]")
	}
	t1 := logTime(ts, args[0], args[1], false)
	t2 := logTime(ts, args[2], args[3], true)
	minSpan, err := time.ParseDuration(args[4])
	ts.Check(err)
	span := t2.Sub(t1)
	ts.Logf("%q in %s came %v after %q in %s", args[3], args[2], span, args[1], args[0])
	if span < minSpan {
		ts.Fatalf("%v between the lines, want at least %v", span, minSpan)
	}
	if len(args) == 6 {
		maxSpan, err := time.ParseDuration(args[5])
		ts.Check(err)
		if span > maxSpan {
			ts.Fatalf("%v between the lines, want at most %v", span, maxSpan)
		}
	}
}

var logTimeRE = regexp.MustCompile(`(?:^|\s)time=(\S+)`)

// logTime is the time= of the first (or last) line of file matching re.
func logTime(ts *testscript.TestScript, file, re string, last bool) time.Time {
	pattern := regexp.MustCompile(re)
	f, err := os.Open(ts.MkAbs(file))
	ts.Check(err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	var at time.Time
	for sc.Scan() {
		line := sc.Text()
		if !pattern.MatchString(line) {
			continue
		}
		m := logTimeRE.FindStringSubmatch(line)
		if m == nil {
			ts.Fatalf("line without time= in %s: %s", file, line)
		}
		at, err = time.Parse(time.RFC3339Nano, m[1])
		ts.Check(err)
		if !last {
			break
		}
	}
	if at.IsZero() {
		ts.Fatalf("no line matching %q in %s", re, file)
	}
	return at
}

// escaped GRANDCHILD_PIDFILE CHILD_READYFILE: the grandchild runs in a
// session of its own, outside the child's session and process group, as
// the kernel says now (not as the helper claims).
func cmdEscaped(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: escaped GRANDCHILD_PIDFILE CHILD_READYFILE")
	}
	g, c := readPid(ts, args[0]), readPid(ts, args[1])
	gsid, gpgid := procIDs(ts, g)
	csid, cpgid := procIDs(ts, c)
	if gsid != g || gsid == csid || gpgid == cpgid {
		ts.Fatalf("grandchild %d has session %d and group %d; child %d has session %d and group %d: want the grandchild in a session of its own",
			g, gsid, gpgid, c, csid, cpgid)
	}
}

// procIDs returns the session and process group of pid from /proc.
func procIDs(ts *testscript.TestScript, pid int) (sid, pgid int) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	ts.Check(err)
	line := string(data)
	f := strings.Fields(line[strings.LastIndexByte(line, ')')+1:])
	// After the command: state ppid pgrp session …
	if len(f) < 4 {
		ts.Fatalf("short /proc/%d/stat: %s", pid, line)
	}
	pgid, err = strconv.Atoi(f[2])
	ts.Check(err)
	sid, err = strconv.Atoi(f[3])
	ts.Check(err)
	return sid, pgid
}

// procenv PIDFILE: print the environment block of the process named in
// PIDFILE, as /proc/PID/environ shows it to anyone allowed to read it, a
// variable per line.
func cmdProcEnv(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: procenv PIDFILE")
	}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", readPid(ts, args[0])))
	ts.Check(err)
	fmt.Fprintln(ts.Stdout(), strings.ReplaceAll(string(data), "\x00", "\n"))
}

// mark FILE: write the time now as at=UNIXNANO, for atspan.
func cmdMark(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: mark FILE")
	}
	writeFile(ts.MkAbs(args[0]), fmt.Sprintf("at=%d", time.Now().UnixNano()))
}

// atspan FILE_A FILE_B MIN [MAX]: the time (at=UNIXNANO) in FILE_B is at
// least MIN (and at most MAX) after the one in FILE_A, as mark and the
// child's ready and exit files record them.
func cmdAtSpan(ts *testscript.TestScript, neg bool, args []string) {
	if neg || (len(args) != 3 && len(args) != 4) {
		ts.Fatalf("usage: atspan FILE_A FILE_B MIN [MAX]")
	}
	span := time.Duration(readField(ts, args[1], "at") - readField(ts, args[0], "at"))
	ts.Logf("%s is %v after %s", args[1], span, args[0])
	minSpan, err := time.ParseDuration(args[2])
	ts.Check(err)
	if span < minSpan {
		ts.Fatalf("%s is %v after %s, want at least %v", args[1], span, args[0], minSpan)
	}
	if len(args) == 4 {
		maxSpan, err := time.ParseDuration(args[3])
		ts.Check(err)
		if span > maxSpan {
			ts.Fatalf("%s is %v after %s, want at most %v", args[1], span, args[0], maxSpan)
		}
	}
}
