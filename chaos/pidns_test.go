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

// pidMap caches, per PID namespace, its pids' pids in the harness's.
var pidMap = struct {
	sync.Mutex
	m map[string]map[int]int
}{m: map[string]map[int]int{}}

// hostPid returns the harness's pid of the process with pid nspid in
// namespace ns, or 0 when no such process lives now (it exited before the
// event was read: nothing of it is left to check).
func hostPid(ns string, nspid int) int {
	pidMap.Lock()
	defer pidMap.Unlock()
	// A namespace's inode is reused once it is gone: a cached pid counts
	// only while it still is nspid in ns.
	if p, ok := pidMap.m[ns][nspid]; ok && nsPidOf(strconv.Itoa(p)) == nspid && pidNamespaceOf(strconv.Itoa(p)) == ns {
		return p
	}
	delete(pidMap.m, ns)
	links, _ := filepath.Glob("/proc/[0-9]*/ns/pid")
	for _, l := range links {
		pid := strings.Split(l, "/")[2]
		if pidNamespaceOf(pid) != ns {
			continue
		}
		host, err := strconv.Atoi(pid)
		if inner := nsPidOf(pid); err == nil && inner > 0 {
			if pidMap.m[ns] == nil {
				pidMap.m[ns] = map[int]int{}
			}
			pidMap.m[ns][inner] = host
		}
	}
	return pidMap.m[ns][nspid]
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
	e.pid = hostPid(ns, e.pid)
	e.kv["pid"] = strconv.Itoa(e.pid)
	for _, k := range []string{"ppid", "gpid"} {
		if v, ok := e.kv[k]; ok {
			if n, err := strconv.Atoi(v); err == nil {
				e.kv[k] = strconv.Itoa(hostPid(ns, n))
			}
		}
	}
}
