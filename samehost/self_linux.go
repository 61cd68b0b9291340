package samehost

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/leaderrun/leaderrun/internal/procstat"
)

// self is where this process runs: Where without a command.
type self struct {
	procstat.Identity
	boot string
}

var (
	selfOnce sync.Once
	selfInfo self
	selfErr  error
)

// thisProcess returns where this process runs, read once. It fails when
// /proc is not this process's PID namespace's (a /proc mounted from
// another namespace would name other processes by the same pids).
func thisProcess() (self, error) {
	selfOnce.Do(func() { selfInfo, selfErr = readSelf() })
	return selfInfo, selfErr
}

func readSelf() (self, error) {
	var s self
	data, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return s, fmt.Errorf("read boot id: %w", err)
	}
	s.boot = strings.TrimSuffix(string(data), "\n")
	if !isBootID(s.boot) {
		return s, fmt.Errorf("read boot id: %.40q is not one", s.boot)
	}
	pid := os.Getpid()
	if link, err := os.Readlink("/proc/self"); err != nil || link != strconv.Itoa(pid) {
		return s, fmt.Errorf("/proc is not this PID namespace's: /proc/self is %q, this process %d", link, pid)
	}
	s.Identity, err = procstat.Self()
	return s, err
}

// Here returns where this process runs with its command, which it started
// as pid with the start time start (supervise.Child.StartTime) and which
// leads its own process group.
func Here(pid int, start uint64) (Where, error) {
	s, err := thisProcess()
	if err != nil {
		return Where{}, err
	}
	if pid <= 0 || start == 0 {
		return Where{}, fmt.Errorf("the command's pid %d or start time %d is unknown", pid, start)
	}
	return Where{Boot: s.boot, PIDNS: s.PIDNS, Pid: s.Pid, Start: s.Start,
		Child: pid, ChildStart: start, Pgid: pid}, nil
}

// procOptions returns the superblock options of the proc filesystem mounted
// on /proc, from /proc/self/mountinfo.
func procOptions() (string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", fmt.Errorf("read mounts: %w", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		// ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [TAGS…] - FSTYPE SOURCE SUPEROPTIONS
		pre, post, ok := strings.Cut(line, " - ")
		f, g := strings.Fields(pre), strings.Fields(post)
		if ok && len(f) >= 5 && f[4] == "/proc" && len(g) >= 3 && g[0] == "proc" {
			return g[2], nil
		}
	}
	return "", errors.New("no proc filesystem on /proc")
}

// seesAll reports, once, whether /proc shows this process every process of
// its PID namespace: a follower that cannot see every member of the old
// command's group cannot tell when the group is gone.
func seesAll() error {
	seesOnce.Do(func() {
		opts, err := procOptions()
		switch {
		case err != nil:
			seesErr = err
		case hidden(opts):
			seesErr = fmt.Errorf("/proc hides processes (%s)", opts)
		}
	})
	return seesErr
}

var (
	seesOnce sync.Once
	seesErr  error
)

// hidden reports whether proc's mount options hide other users'
// processes: hidepid other than 0 or off.
func hidden(opts string) bool {
	for _, o := range strings.Split(opts, ",") {
		if v, ok := strings.CutPrefix(o, "hidepid="); ok && v != "0" && v != "off" {
			return true
		}
	}
	return false
}
