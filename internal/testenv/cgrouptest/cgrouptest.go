// Package cgrouptest gives a test binary a cgroup v2 subtree of its own.
// A leaderrun reclaims the cgroups that dead leaderruns left in its own
// cgroup's directory, so a test of that work (or of a kill that a cgroup
// makes whole) run in a cgroup shared with other leaderruns on the host
// could pass because another one did the work. In a cgroup of its own,
// only the test binary and the processes it starts are there to do it.
package cgrouptest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/internal/cgroupv2"
	"github.com/leaderrun/leaderrun/internal/procstat"
)

// Enter moves this process into a new cgroup below its own, and returns
// the function that moves it back and kills and removes what the tests
// left in the new one. Call it first in TestMain, before any process is
// started; it fails where cgroups cannot be made (no cgroup v2, no
// permission), leaving this process where it was (leave then does
// nothing).
//
// The cgroup is named, and locked with flock, as leaderrun names and
// locks its commands' cgroups (leaderrun-PIDNS-PID-START-SEQ, SEQ 0): a
// leaderrun sharing the old cgroup leaves it alone while this process
// lives, and should the test binary die, the next one to start there
// reclaims it.
func Enter() (leave func(), err error) {
	nothing := func() {}
	rel, ok := cgroupv2.Of("self")
	if !ok {
		return nothing, errors.New("no cgroup v2 hierarchy")
	}
	root, err := cgroupv2.Root()
	if err != nil {
		return nothing, err
	}
	self, err := procstat.Self()
	if err != nil {
		return nothing, err
	}
	parent := filepath.Join(root, rel)
	dir := filepath.Join(parent, fmt.Sprintf("leaderrun-%d-%d-%d-0", self.PIDNS, self.Pid, self.Start))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nothing, err
	}
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err == nil {
		err = unix.Flock(fd, unix.LOCK_EX|unix.LOCK_NB)
	}
	pid := []byte(strconv.Itoa(os.Getpid()))
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, "cgroup.procs"), pid, 0)
	}
	if err != nil {
		unix.Close(fd)
		os.Remove(dir)
		return nothing, fmt.Errorf("a cgroup of its own for the test binary: %w", err)
	}
	return func() {
		defer unix.Close(fd)
		if err := os.WriteFile(filepath.Join(parent, "cgroup.procs"), pid, 0); err != nil {
			fmt.Fprintf(os.Stderr, "cgrouptest: cannot leave %s: %v\n", dir, err)
			return
		}
		os.WriteFile(filepath.Join(dir, "cgroup.kill"), []byte("1"), 0)
		for deadline := time.Now().Add(10 * time.Second); cgroupv2.RemoveTree(dir) != nil; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				fmt.Fprintf(os.Stderr, "cgrouptest: %s still holds processes after 10 s\n", dir)
				return
			}
		}
	}, nil
}
