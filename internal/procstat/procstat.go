// Package procstat reads a process's identity from /proc/PID/stat (its
// parent, process group, session, state and start time), its PID namespace
// and its pids in the nested ones, and this process's identity (Self).
package procstat

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
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
	data, err := ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
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

// ReadFile reads a file of /proc in three system calls (os.ReadFile makes
// about ten, as it tries the runtime's poller first): a stop signal's way
// to a command reads a few of them. Its errors are os.ReadFile's.
func ReadFile(path string) ([]byte, error) {
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	b := make([]byte, 0, 2048)
	for {
		n, err := syscall.Read(fd, b[len(b):cap(b)])
		switch {
		case err == syscall.EINTR:
			continue
		case err != nil:
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		case n == 0:
			return b, nil
		}
		if b = b[:len(b)+n]; len(b) == cap(b) {
			b = slices.Grow(b, len(b))
		}
	}
}

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

// NSPids returns process pid's pid in each PID namespace it is in, from
// the one of the /proc mount to its own (the NSpid line of
// /proc/PID/status): one pid outside a nested namespace.
func NSPids(pid int) ([]int, error) {
	data, err := ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return nil, fmt.Errorf("read status of pid %d: %w", pid, err)
	}
	for line := range bytes.SplitSeq(data, []byte("\n")) {
		ids, ok := bytes.CutPrefix(line, []byte("NSpid:"))
		if !ok {
			continue
		}
		var pids []int
		for _, f := range bytes.Fields(ids) {
			n, err := strconv.Atoi(string(f))
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("read status of pid %d: malformed NSpid", pid)
			}
			pids = append(pids, n)
		}
		if len(pids) > 0 {
			return pids, nil
		}
	}
	return nil, fmt.Errorf("read status of pid %d: no NSpid", pid)
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
