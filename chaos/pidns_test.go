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

// ownPIDNamespace is the inode of a process's PID namespace, "" if unknown.
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
	if p, ok := pidMap.m[ns][nspid]; ok {
		return p
	}
	links, _ := filepath.Glob("/proc/[0-9]*/ns/pid")
	for _, l := range links {
		pid := strings.Split(l, "/")[2]
		if pidNamespaceOf(pid) != ns {
			continue
		}
		data, err := os.ReadFile("/proc/" + pid + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			v, ok := strings.CutPrefix(line, "NSpid:")
			if !ok {
				continue
			}
			f := strings.Fields(v)
			host, err1 := strconv.Atoi(f[0])
			inner, err2 := strconv.Atoi(f[len(f)-1])
			if err1 == nil && err2 == nil {
				if pidMap.m[ns] == nil {
					pidMap.m[ns] = map[int]int{}
				}
				pidMap.m[ns][inner] = host
			}
		}
	}
	return pidMap.m[ns][nspid]
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
