package chaos

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Environment of the recording child and its grandchild. The replicas get
// these; leaderrun passes them on to the child (it strips only LEADERRUN_*).
const (
	envRole     = "CHAOS_ROLE"      // roleChild or roleGrandchild: run as such instead of as a test binary
	envDir      = "CHAOS_DIR"       // the run directory: event log, tenure locks, control files
	envFence    = "CHAOS_FENCE"     // the store the fenced writes go to: fencePostgres, fenceMySQL, or empty for beats
	envFenceDSN = "CHAOS_FENCE_DSN" // direct DSN for fenced writes
	envSchema   = "CHAOS_SCHEMA"    // PostgreSQL: the lease schema, home of fence() and chaos_writes
	envToken    = "CHAOS_TOKEN"     // the grandchild's inherited token
	envPart     = "CHAOS_PART"      // the grandchild's inherited partition; empty for one name
)

// Stores with in-database fencing, as envFence names them.
const (
	fencePostgres = "postgres"
	fenceMySQL    = "mysql"
)

const (
	roleChild      = "child"
	roleGrandchild = "grandchild"
)

// Files in the run directory.
const (
	eventsFile = "events.log" // every process appends its events here
)

// lockFile is the file a tenure's child and its descendants hold a flock
// on: one per partition, since children of different partitions may run at
// once.
func lockFile(dir, part string) string {
	if part == "" {
		return filepath.Join(dir, "tenure.lock")
	}
	return filepath.Join(dir, "tenure."+part+".lock")
}

// leaseName is the name every replica campaigns for.
const leaseName = "relay"

// childExitCode is the recording child's status after a stop signal; a
// SIGTERM'd leader must exit with it.
const childExitCode = 3

// controlFile is where the driver arms the child of tenure token of
// partition part ("" for one name). Tokens of different partitions may be
// equal.
func controlFile(dir, part string, token int64) string {
	if part == "" {
		return filepath.Join(dir, "control."+strconv.FormatInt(token, 10))
	}
	return filepath.Join(dir, "control."+part+"."+strconv.FormatInt(token, 10))
}

// Arming a child: what the driver writes to its control file.
const (
	armIgnoreTerm = "ignore-term" // record SIGTERM and keep running
	armEscape     = "escape"      // start a grandchild that calls setsid
)

// recorder appends events to the shared log, each line with one write(2)
// on an O_APPEND descriptor, so lines from many processes never interleave.
type recorder struct {
	f     *os.File
	pid   int
	token string
	part  string // "" for one name
	pidns string // the inode of its PID namespace (see pidns_test.go)
}

func openRecorder(dir, token, part string) (*recorder, error) {
	f, err := os.OpenFile(filepath.Join(dir, eventsFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return &recorder{f: f, pid: os.Getpid(), pidns: pidNamespaceOf("self"), token: token, part: part}, nil
}

// emit writes "KIND at=NS pid=P token=T [part=N] k=v ..." with at the
// time now.
func (r *recorder) emit(kind string, kv ...any) { r.emitAt(time.Now(), kind, kv...) }

// emitAt writes an event that happened at at.
func (r *recorder) emitAt(at time.Time, kind string, kv ...any) {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s at=%d pid=%d token=%s pidns=%s", kind, at.UnixNano(), r.pid, r.token, r.pidns)
	if r.part != "" {
		fmt.Fprintf(&b, " part=%s", r.part)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		v := fmt.Sprint(kv[i+1])
		v = strings.Map(func(c rune) rune {
			if c == ' ' || c == '\n' || c == '\t' {
				return '_'
			}
			return c
		}, v)
		fmt.Fprintf(&b, " %v=%s", kv[i], v)
	}
	b.WriteByte('\n')
	r.f.Write(b.Bytes())
}

// procStartTime is field 22 of /proc/PID/stat: when the process started,
// in clock ticks since boot. With the pid it names one process for ever.
func procStartTime(pid int) (uint64, bool) {
	st, ok := procStat(pid)
	return st.start, ok
}

type procInfo struct {
	state byte
	ppid  int
	pgrp  int
	start uint64
}

func procStat(pid int) (procInfo, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procInfo{}, false
	}
	s := string(data)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procInfo{}, false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 20 {
		return procInfo{}, false
	}
	ppid, _ := strconv.Atoi(f[1])
	pgrp, _ := strconv.Atoi(f[2])
	start, _ := strconv.ParseUint(f[19], 10, 64)
	return procInfo{state: f[0][0], ppid: ppid, pgrp: pgrp, start: start}, true
}

// aliveAs reports whether pid is still the process that started at start
// and is not a zombie.
func aliveAs(pid int, start uint64) bool {
	st, ok := procStat(pid)
	return ok && st.start == start && st.state != 'Z' && st.state != 'X'
}

// lockHolders lists the pids /proc/locks names for the inode of f.
func lockHolders(ino uint64) string {
	data, err := os.ReadFile("/proc/locks")
	if err != nil {
		return ""
	}
	suffix := ":" + strconv.FormatUint(ino, 10)
	var pids []string
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		// "1: FLOCK ADVISORY WRITE PID MAJ:MIN:INO 0 EOF"; waiters have "->" after the index.
		if len(f) < 6 || f[1] == "->" {
			continue
		}
		if strings.HasSuffix(f[5], suffix) && f[1] == "FLOCK" {
			pids = append(pids, f[4])
		}
	}
	return strings.Join(pids, ",")
}
