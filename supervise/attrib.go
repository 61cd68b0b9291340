package supervise

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"
	"strings"
)

// Several Children may run at once (one per partition). Descendants that
// escape a Child's process group are adopted by this process (subreaper or
// PID 1), and the sweep must kill those of the Child being stopped, and
// never another live Child's. A stray is attributed to the Child it came
// from by, first, the process tree recorded while its parent was alive
// (origins: every second while several Children run), then the tag each
// Child puts in its environment (tagEnv), which descendants inherit. A stray nothing
// attributes (it cleared its environment and escaped between two records)
// is killed by any sweep: leaving it alive after a release would be worse
// than stopping another Child's process.

// tagEnv names the variable that tags a Child's descendants.
const tagEnv = "LEADERRUN_SUPERVISOR_TAG"

// procID is a process: its pid and start time, so that a reused pid is
// never taken for the process recorded under it.
type procID struct {
	pid   int
	start uint64
}

func newTag() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// owner returns the Child that pid descends from, or nil. r.mu must be
// held.
func (r *reaper) owner(pid int) *Child {
	if st, ok := procStat(pid); ok {
		if c := r.origins[procID{pid, st.start}]; c != nil {
			return c
		}
	}
	environ, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return nil
	}
	prefix := []byte(tagEnv + "=")
	for _, kv := range bytes.Split(environ, []byte{0}) {
		if v, ok := bytes.CutPrefix(kv, prefix); ok {
			return r.tags[string(v)]
		}
	}
	return nil
}

// recordOrigins records every process that descends from a live Child now.
// r.mu must be held.
func (r *reaper) recordOrigins() {
	kids := map[int][]procStat_{}
	for _, p := range allProcs() {
		kids[p.ppid] = append(kids[p.ppid], p)
	}
	for _, c := range r.children {
		stack := []int{c.pid}
		for len(stack) > 0 {
			pid := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, k := range kids[pid] {
				r.origins[procID{k.pid, k.start}] = c
				stack = append(stack, k.pid)
			}
		}
	}
}

// forget drops what was recorded of c, once its Stop has swept. r.mu must
// be held.
func (r *reaper) forget(c *Child) {
	delete(r.tags, c.tag)
	for id, o := range r.origins {
		if o == c {
			delete(r.origins, id)
		}
	}
}

// procStat_ is what procStat reads of /proc/PID/stat.
type procStat_ struct {
	pid, ppid int
	state     byte   // R, S, D, Z, …
	start     uint64 // starttime, in clock ticks since boot
}

// procStat reads pid's parent and start time.
func procStat(pid int) (procStat_, bool) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat_{}, false
	}
	// "pid (comm) state ppid … starttime …": comm may hold spaces and ')'.
	i := bytes.LastIndexByte(data, ')')
	if i < 0 {
		return procStat_{}, false
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 20 {
		return procStat_{}, false
	}
	ppid, err1 := strconv.Atoi(f[1])
	start, err2 := strconv.ParseUint(f[19], 10, 64)
	if err1 != nil || err2 != nil {
		return procStat_{}, false
	}
	return procStat_{pid: pid, ppid: ppid, state: f[0][0], start: start}, true
}

// allProcs reads every process's parent and start time.
func allProcs() []procStat_ {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []procStat_
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, ok := procStat(pid); ok {
			out = append(out, st)
		}
	}
	return out
}
