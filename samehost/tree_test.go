//go:build linux

package samehost

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/cgroupv2"
)

// decoy makes, in dir, a directory named as a cgroup can be (name) that
// is not one: its cgroup.kill is a symbolic link to a file of root's that
// reads "precious", its cgroup.events says it is empty. It returns the
// directory and the file.
func decoy(t *testing.T, dir, name string) (string, string) {
	t.Helper()
	d := filepath.Join(dir, name)
	victim := filepath.Join(dir, "victim")
	for _, err := range []error{
		os.Mkdir(d, 0o755),
		os.WriteFile(victim, []byte("precious"), 0o600),
		os.Symlink(victim, filepath.Join(d, "cgroup.kill")),
		os.WriteFile(filepath.Join(d, "cgroup.events"), []byte("populated 0\nfrozen 0\n"), 0o644),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return d, victim
}

// untouched fails the test unless victim still reads "precious" and the
// decoy directory d holds only what decoy put there.
func untouched(t *testing.T, d, victim string) {
	t.Helper()
	if got, err := os.ReadFile(victim); err != nil || string(got) != "precious" {
		t.Errorf("%s = %q, %v after the follower; want it untouched (%q)", victim, got, err, "precious")
	}
	entries, err := os.ReadDir(d)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		t.Errorf("%s holds %d entries after the follower, want the 2 it had", d, len(entries))
	}
}

// TestProveKillsOnlyCgroupsOfTheHierarchy: a follower in a cgroup
// namespace of its own (rooted beside the holder's command's cgroup, with
// cgroup2 mounted as that namespace sees it) reads the command's cgroup
// as "/../leaderrun-…", which joined to its mount names a directory
// outside the hierarchy: there a decoy waits, whose cgroup.kill links to
// a file of root's. When the holder dies, the follower must write nothing
// there (and may refuse to prove the holder dead).
func TestProveKillsOnlyCgroupsOfTheHierarchy(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting cgroup2 in a namespace of its own takes root")
	}
	if _, err := exec.LookPath("unshare"); err != nil {
		t.Skip(err)
	}
	base := cgroupsForTest(t)
	ten := startTenure(t, shape{})
	cmdCgroup, ok := cgroupv2.Of(strconv.Itoa(ten.command))
	if !ok {
		t.Fatal("no cgroup for the command")
	}
	nsRoot, err := os.MkdirTemp(base, "cgns-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(nsRoot) })
	dir := t.TempDir()
	mnt := filepath.Join(dir, "cgroup")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	d, victim := decoy(t, dir, filepath.Base(cmdCgroup))
	cg, err := os.Open(nsRoot)
	if err != nil {
		t.Fatal(err)
	}
	defer cg.Close()

	c := exec.Command("unshare", "--cgroup", "--mount", "sh", "-c", `mount -t cgroup2 none "$0" && exec "$@"`, mnt, os.Args[0])
	c.SysProcAttr = &syscall.SysProcAttr{UseCgroupFD: true, CgroupFD: int(cg.Fd())}
	f := startFollower(t, c, ten.where.String())
	exited := false
	waitUntil(t, "the follower to watch the holder or give up", func() bool {
		select {
		case <-f.exited:
			exited = true
			return true
		default:
		}
		_, err := os.Stat(f.ready)
		return err == nil
	})
	if !exited {
		if err := ten.holder.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		select {
		case <-f.exited:
		case <-time.After(10 * time.Second):
			t.Fatal("the follower did not end after the holder died")
		}
	}
	proved := f.err // the follower's exit: nil when it proved the holder dead
	untouched(t, d, victim)
	if proved == nil && running(ten.sleeper) {
		t.Errorf("the follower proved the holder dead and its command's tree gone, but the sleeper %d in its cgroup runs", ten.sleeper)
	}
}

// TestKillCgroupWritesOnlyCgroup2: killCgroup of a directory that is not
// a cgroup (not on cgroup2, outside the hierarchy's mount) fails and
// writes nothing: not through its cgroup.kill, a symbolic link to a file
// of root's, and no cgroup.kill is made where there is none.
func TestKillCgroupWritesOnlyCgroup2(t *testing.T) {
	d, victim := decoy(t, t.TempDir(), "leaderrun-1-2-3-4")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := killCgroup(ctx, d); err == nil {
		t.Errorf("killCgroup(%s) = nil; want an error: it is no cgroup", d)
	}
	untouched(t, d, victim)

	empty := filepath.Join(t.TempDir(), "leaderrun-1-2-3-5")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := killCgroup(ctx, empty); err == nil {
		t.Errorf("killCgroup(%s) = nil; want an error: it is no cgroup", empty)
	}
	if _, err := os.Lstat(filepath.Join(empty, "cgroup.kill")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("killCgroup made %s/cgroup.kill (%v)", empty, err)
	}
}

// TestKillCgroupKillsThroughALinkedPathNever: a path to a real cgroup
// through a symbolic link is no cgroup of the hierarchy's: killCgroup
// refuses it and its process lives.
func TestKillCgroupKillsThroughALinkedPathNever(t *testing.T) {
	ten := startTenure(t, shape{alone: true})
	cmdCgroup, ok := cgroupv2.Of(strconv.Itoa(ten.command))
	if !ok {
		t.Fatal("no cgroup for the command")
	}
	root, err := cgroupv2.Root()
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(t.TempDir(), "cgroup")
	if err := os.Symlink(root+cmdCgroup, link); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	if err := killCgroup(ctx, link); err == nil {
		t.Errorf("killCgroup(%s) = nil; want an error: a link is no cgroup", link)
	}
	if !running(ten.command) {
		t.Errorf("the command in %s was killed through the link %s", cmdCgroup, link)
	}
}
