// Package cgroupv2 reads where processes sit in the cgroup v2 hierarchy
// and where that hierarchy is mounted, and removes a cgroup with those
// below it: what supervise needs to give each child a cgroup of its own,
// and what the same-host fast path (package samehost) needs to find a
// dead leader's command's cgroup.
package cgroupv2

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"strings"
)

// Of returns the cgroup v2 path of process pid ("self" for this process)
// as /proc/PID/cgroup gives it ("/a/b" from the line "0::/a/b"), and
// whether it found one (not for a process that has gone, nor without a
// v2 hierarchy).
func Of(pid string) (string, bool) {
	data, err := os.ReadFile("/proc/" + pid + "/cgroup")
	if err != nil {
		return "", false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rel, ok := strings.CutPrefix(line, "0::"); ok {
			return rel, true
		}
	}
	return "", false
}

// Root returns where the cgroup v2 hierarchy is mounted whole (a mount of
// its root, not a bind mount of a subtree, where paths of Of would not
// resolve), from /proc/self/mountinfo.
func Root() (string, error) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [TAGS] - FSTYPE SOURCE SUPER"
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields := strings.Fields(pre)
		if ok && len(fields) >= 5 && strings.HasPrefix(post, "cgroup2 ") && fields[3] == "/" {
			return fields[4], nil
		}
	}
	return "", errors.New("cgroup v2 is not mounted whole")
}

// RemoveTree removes the cgroup dir and every cgroup below it, deepest
// first; a cgroup that still holds a process makes it fail with EBUSY. A
// dir already gone is no error.
func RemoveTree(dir string) error {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.IsDir() {
			if err := RemoveTree(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	if err := os.Remove(dir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
