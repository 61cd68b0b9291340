package chaos

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// leaderrun runs each child in a PID namespace of its own by default, where
// the child's pids are not the harness's. A child records its PID
// namespace (pidns=INODE) beside its own pid, its parent's and its
// grandchild's; the harness translates them into its own namespace's pids
// as it reads the events, through /proc/PID/status's NSpid line, which
// lists a process's pid in every namespace from the reader's down.

// pidNamespaceOf is the inode of a process's PID namespace, "" if unknown.
func pidNamespaceOf(pid string) string {
	link, err := os.Readlink("/proc/" + pid + "/ns/pid")
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(strings.TrimPrefix(link, "pid:["), "]")
}

var harnessNS = pidNamespaceOf("self")

// pidMap caches, per PID namespace, its pids' pids in the harness's, with
// their start times.
var pidMap = struct {
	sync.Mutex
	m map[string]map[int]hostProc
}{m: map[string]map[int]hostProc{}}

type hostProc struct {
	pid   int
	stime uint64
}

// hostPid returns the harness's pid of the process with pid nspid in
// namespace ns, or 0 when no such process lives now (it exited before the
// event was read: nothing of it is left to check). stime, when not 0, is
// the process's start time: a namespace's inode, and so its pids, are
// reused once it is gone, but a start time tells a later process from an
// earlier one. Without one, the pid cached for nspid counts while its
// process still runs with the start time it had.
func hostPid(ns string, nspid int, stime uint64) int {
	pidMap.Lock()
	defer pidMap.Unlock()
	if p, ok := pidMap.m[ns][nspid]; ok && (stime == 0 || stime == p.stime) {
		if st, ok := procStat(p.pid); ok && st.start == p.stime && nsPidOf(strconv.Itoa(p.pid)) == nspid {
			return p.pid
		}
	}
	links, _ := filepath.Glob("/proc/[0-9]*/ns/pid")
	for _, l := range links {
		pid := strings.Split(l, "/")[2]
		host, err := strconv.Atoi(pid)
		if err != nil || nsPidOf(pid) != nspid || pidNamespaceOf(pid) != ns {
			continue
		}
		st, ok := procStat(host)
		if !ok || (stime != 0 && st.start != stime) {
			continue
		}
		if pidMap.m[ns] == nil {
			pidMap.m[ns] = map[int]hostProc{}
		}
		pidMap.m[ns][nspid] = hostProc{host, st.start}
		return host
	}
	return 0
}

// nsPidOf returns pid's pid in its innermost PID namespace (the last
// field of its NSpid line), or 0.
func nsPidOf(pid string) int {
	data, err := os.ReadFile("/proc/" + pid + "/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				return 0
			}
			n, _ := strconv.Atoi(f[len(f)-1])
			return n
		}
	}
	return 0
}

// toHarnessPids rewrites the pids of an event recorded in another PID
// namespace (pid, ppid, gpid) as the harness sees them.
func toHarnessPids(e *event) {
	ns := e.kv["pidns"]
	if ns == "" || ns == harnessNS {
		return
	}
	stime, _ := strconv.ParseUint(e.kv["stime"], 10, 64) // start and gstart events
	e.pid = hostPid(ns, e.pid, stime)
	e.kv["pid"] = strconv.Itoa(e.pid)
	for _, k := range []string{"ppid", "gpid"} {
		if v, ok := e.kv[k]; ok {
			if n, err := strconv.Atoi(v); err == nil {
				e.kv[k] = strconv.Itoa(hostPid(ns, n, 0))
			}
		}
	}
}
