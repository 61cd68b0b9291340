package main

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/testscript"
)

// TestOrphans runs testdata/orphans: what dies with leaderrun in its
// default mode, as root and as a user without privilege. Unlike the other
// scripts, these leave --pid-namespace unset unless they set it.
func TestOrphans(t *testing.T) {
	p := scriptParams("testdata/orphans", func(env *testscript.Env) error {
		env.Vars = slices.DeleteFunc(env.Vars, func(kv string) bool {
			return strings.HasPrefix(kv, "LEADERRUN_PID_NAMESPACE=")
		})
		env.Setenv("LEADERRUN_STORE", "sqlite:"+filepath.Join(env.WorkDir, "leases.db"))
		return nil
	}, false)
	p.Cmds["unprivileged"] = cmdUnprivileged
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
