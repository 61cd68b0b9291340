package supervise

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strconv"

	"github.com/leaderrun/leaderrun/internal/nsinit"
	"github.com/leaderrun/leaderrun/internal/procstat"
)

// Several Children may run at once (one per partition). Descendants that
// escape a Child's process group are adopted by this process (subreaper or
// PID 1), and the sweep must kill those of the Child being stopped, and
// never another live Child's. A stray is attributed to the Child it came
// from by, first, the process tree recorded while its parent was alive
// (origins: every second while several Children that may leave strays
// run, see recordWhileSeveral), then the tag each
// Child puts in its environment (tagEnv), which descendants inherit. A stray nothing
// attributes (it cleared its environment and escaped between two records)
// is killed by any sweep: leaving it alive after a release would be worse
// than stopping another Child's process.

// tagEnv names the variable that tags a Child's descendants.
const tagEnv = nsinit.TagEnv

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
	if st, err := procstat.Read(pid); err == nil {
		if c := r.origins[procID{pid, st.Start}]; c != nil {
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
	kids := map[int][]procstat.Stat{}
	for _, p := range allProcs() {
		kids[p.PPid] = append(kids[p.PPid], p)
	}
	for _, c := range r.children {
		stack := []int{c.pid}
		for len(stack) > 0 {
			pid := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for _, k := range kids[pid] {
				r.origins[procID{k.Pid, k.Start}] = c
				stack = append(stack, k.Pid)
			}
		}
	}
}

// forgetChild is forget with the reaper's mutex taken.
func (r *reaper) forgetChild(c *Child) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.forget(c)
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

// allProcs reads every process's parent and start time.
func allProcs() []procstat.Stat {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []procstat.Stat
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := procstat.Read(pid); err == nil {
			out = append(out, st)
		}
	}
	return out
}
