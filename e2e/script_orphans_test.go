package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestOrphans runs testdata/orphans: what dies with leaderrun in its
// default mode, as root and as a user without privilege. Unlike the other
// scripts, these leave --pid-namespace unset unless they set it.
func TestOrphans(t *testing.T) {
	p := scriptParams("../testdata/orphans", func(env *testscript.Env) error {
		env.Vars = slices.DeleteFunc(env.Vars, func(kv string) bool {
			return strings.HasPrefix(kv, "LEADERRUN_PID_NAMESPACE=")
		})
		env.Setenv("LEADERRUN_STORE", "sqlite:"+filepath.Join(env.WorkDir, "leases.db"))
		return nil
	}, false)
	p.Cmds["unprivileged"] = cmdUnprivileged
	p.Cmds["mkcgroup"] = cmdMkCgroup
	testscript.Run(t, p)
}

// unprivileged DIR UID: make DIR a home for user UID (its own, mode 0700,
// on a path the user can traverse) holding copies of leaderrun and lrchild
// that the user may run: the test binary's own directory is root's alone.
func cmdUnprivileged(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: unprivileged DIR UID")
	}
	if os.Geteuid() != 0 {
		ts.Fatalf("unprivileged: needs root to run a script part as another user")
	}
	dir := ts.MkAbs(args[0])
	uid, err := strconv.Atoi(args[1])
	ts.Check(err)
	ts.Check(os.MkdirAll(dir, 0o700))
	self, err := os.Executable()
	ts.Check(err)
	data, err := os.ReadFile(self)
	ts.Check(err)
	for _, name := range []string{"leaderrun", "lrchild"} {
		p := filepath.Join(dir, name)
		ts.Check(os.WriteFile(p, data, 0o755))
		ts.Check(os.Chown(p, uid, uid))
	}
	ts.Check(os.Chown(dir, uid, uid))
	for d := filepath.Dir(dir); d != "/"; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		ts.Check(err)
		if fi.Mode().Perm()&0o001 == 0 {
			ts.Check(os.Chmod(d, fi.Mode().Perm()|0o011))
		}
	}
}

// mkcgroup VAR: create a cgroup of the script's own below the test's, and
// set VAR to its cgroup.procs: a process that writes its pid there (and
// what it starts) runs apart from every other script's leaderrun, which
// would otherwise reclaim what a killed leaderrun left in its place. The
// cgroup and what is left in it are removed when the script ends.
func cmdMkCgroup(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: mkcgroup VAR")
	}
	data, err := os.ReadFile("/proc/self/cgroup")
	ts.Check(err)
	var rel string
	for _, line := range strings.Split(string(data), "\n") {
		if r, ok := strings.CutPrefix(line, "0::"); ok {
			rel = r
		}
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	ts.Check(err)
	var root string
	for _, line := range strings.Split(string(mounts), "\n") {
		if pre, post, ok := strings.Cut(line, " - "); ok && strings.HasPrefix(post, "cgroup2 ") {
			if f := strings.Fields(pre); len(f) >= 5 && f[3] == "/" {
				root = f[4]
			}
		}
	}
	if root == "" {
		ts.Fatalf("mkcgroup: no cgroup v2 mount")
	}
	dir, err := os.MkdirTemp(filepath.Join(root, rel), "lrtest-")
	ts.Check(err)
	ts.Defer(func() {
		for range 100 {
			// Kill what is left, then remove the cgroups, deepest first.
			os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
			var dirs []string
			filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
				if err == nil && d.IsDir() {
					dirs = append(dirs, p)
				}
				return nil
			})
			slices.Reverse(dirs)
			for _, d := range dirs {
				os.Remove(d)
			}
			if _, err := os.Stat(dir); os.IsNotExist(err) {
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	})
	ts.Setenv(args[0], filepath.Join(dir, "cgroup.procs"))
}
