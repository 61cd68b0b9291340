// Package procstat reads a process's identity from /proc/PID/stat (its
// parent, process group, session, state and start time) and its PID
// namespace, and this process's identity (Self).
package procstat

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"syscall"
)

// Stat is the part of /proc/PID/stat that identifies a process.
type Stat struct {
	Pid   int
	Comm  string // the command name (at most 15 bytes, any of them)
	State byte   // R, S, D, Z, T, t, X, …
	PPid  int
	Pgid  int
	Sid   int
	// Start is when the process started, in clock ticks since boot
	// (field 22, starttime). With the boot id, pid and Start name one
	// process for the life of the host.
	Start uint64
}

// Read reads /proc/PID/stat. The error wraps fs.ErrNotExist when no such
// process exists (in the PID namespace of the /proc mount).
func Read(pid int) (Stat, error) {
	if pid <= 0 {
		return Stat{}, fmt.Errorf("read stat of pid %d: not a process id", pid)
	}
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return Stat{}, fmt.Errorf("read stat of pid %d: %w", pid, err)
	}
	st, err := Parse(data)
	if err != nil {
		return Stat{}, fmt.Errorf("read stat of pid %d: %w", pid, err)
	}
	if st.Pid != pid {
		return Stat{}, fmt.Errorf("read stat of pid %d: it names pid %d", pid, st.Pid)
	}
	return st, nil
}

var errMalformed = errors.New("malformed /proc/PID/stat")

// Parse parses the contents of /proc/PID/stat. The command name, between
// the first "(" and the last ")", may hold any bytes, spaces and
// parentheses included.
func Parse(data []byte) (Stat, error) {
	open := bytes.IndexByte(data, '(')
	shut := bytes.LastIndexByte(data, ')')
	if open < 1 || shut < open {
		return Stat{}, errMalformed
	}
	var st Stat
	var err error
	if st.Pid, err = strconv.Atoi(string(bytes.TrimSuffix(data[:open], []byte(" ")))); err != nil {
		return Stat{}, errMalformed
	}
	st.Comm = string(data[open+1 : shut])
	// After the name: state(3) ppid(4) pgrp(5) session(6) … starttime(22).
	f := bytes.Fields(data[shut+1:])
	if len(f) < 20 || len(f[0]) != 1 {
		return Stat{}, errMalformed
	}
	st.State = f[0][0]
	ints := []*int{&st.PPid, &st.Pgid, &st.Sid}
	for i, p := range ints {
		if *p, err = strconv.Atoi(string(f[1+i])); err != nil {
			return Stat{}, errMalformed
		}
	}
	if st.Start, err = strconv.ParseUint(string(f[19]), 10, 64); err != nil {
		return Stat{}, errMalformed
	}
	return st, nil
}

// PIDNamespace returns the inode of the PID namespace of process pid
// ("self" for this process), which tells namespaces apart while they live.
func PIDNamespace(pid string) (uint64, error) {
	var st syscall.Stat_t
	if err := syscall.Stat("/proc/"+pid+"/ns/pid", &st); err != nil {
		return 0, fmt.Errorf("read the PID namespace of %s: %w", pid, err)
	}
	if st.Ino == 0 {
		return 0, fmt.Errorf("read the PID namespace of %s: inode 0", pid)
	}
	return st.Ino, nil
}

// Identity is what of a process never changes while it lives: its pid,
// start time and PID namespace (with the boot id, they name it for the
// life of the host), and its command name.
type Identity struct {
	Pid   int
	Comm  string
	Start uint64
	PIDNS uint64
}

// Self returns this process's identity, read from /proc once.
var Self = sync.OnceValues(func() (Identity, error) {
	st, err := Read(os.Getpid())
	if err != nil {
		return Identity{}, err
	}
	ns, err := PIDNamespace("self")
	if err != nil {
		return Identity{}, err
	}
	return Identity{Pid: st.Pid, Comm: st.Comm, Start: st.Start, PIDNS: ns}, nil
})
