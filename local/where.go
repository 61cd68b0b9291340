package local

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Where is where a holder runs, as it writes it in its lease record
// (lease.Record.Where): enough for a follower on the same host to find the
// holder and its command, and to tell them from later processes that
// reuse their pids.
type Where struct {
	// Boot is the host's boot id (/proc/sys/kernel/random/boot_id).
	Boot string
	// PIDNS is the inode of the holder's PID namespace (/proc/self/ns/pid).
	PIDNS uint64
	// Pid and Start are the holder's (leaderrun's) process id and start
	// time in clock ticks since boot (/proc/PID/stat, field 22).
	Pid   int
	Start uint64
	// Child and ChildStart are the same for the holder's command;
	// Pgid is the command's process group, which the command leads.
	Child      int
	ChildStart uint64
	Pgid       int
	// EndFD and EndIno name the holder's EndSignal: its descriptor in the
	// holder and the pipe's inode; EndIno is 0 when it has none.
	EndFD  int
	EndIno uint64
}

// version is the first word of an encoded Where, versionEnd that of one
// with an EndSignal. A decoder refuses any other: a follower that does not
// know a newer format falls back to the lease's expiry.
const (
	version    = "v1"
	versionEnd = "v2"
)

// maxWhere bounds an encoded Where; a longer one is refused unread.
const maxWhere = 256

// maxPid is the kernel's PID_MAX_LIMIT: no pid is larger.
const maxPid = 1 << 22

// maxFD is the kernel's NR_OPEN: no file descriptor is larger.
const maxFD = 1<<20 - 1

// keys are the encoding's fields after the version, in their only order;
// versionEnd adds endKeys.
var (
	keys    = []string{"boot", "pidns", "pid", "start", "child", "child_start", "pgid"}
	endKeys = []string{"end_fd", "end_ino"}
)

// String encodes w as "v1 boot=… pidns=… pid=… start=… child=…
// child_start=… pgid=…", or with an EndSignal as "v2 …" followed by
// " end_fd=… end_ino=…": the forms Parse reads.
func (w Where) String() string {
	s := fmt.Sprintf("boot=%s pidns=%d pid=%d start=%d child=%d child_start=%d pgid=%d",
		w.Boot, w.PIDNS, w.Pid, w.Start, w.Child, w.ChildStart, w.Pgid)
	if w.EndIno == 0 {
		return version + " " + s
	}
	return fmt.Sprintf("%s %s end_fd=%d end_ino=%d", versionEnd, s, w.EndFD, w.EndIno)
}

// ErrVersion is wrapped by Parse's error for a Where in a format this
// leaderrun does not know (written by a newer one).
var ErrVersion = errors.New("unknown format version")

// Parse decodes what String encodes, and nothing else: the version, then
// every key once, in order, separated by single spaces; a boot id in the
// kernel's form (36 lowercase hexadecimal digits and dashes); decimal
// numbers without sign or leading zeros, pids between 1 and the kernel's
// limit, a PID namespace inode other than 0, a command that is not the
// holder itself. Anything a store holds may have been written by anyone
// with access to it, so Parse trusts nothing.
func Parse(s string) (Where, error) {
	var w Where
	if len(s) > maxWhere {
		return w, fmt.Errorf("parse where: %d bytes, more than %d", len(s), maxWhere)
	}
	fields := strings.Split(s, " ")
	want := keys
	switch fields[0] {
	case version:
	case versionEnd:
		want = append(slices.Clip(keys), endKeys...)
	default:
		return w, fmt.Errorf("parse where: %w %.16q", ErrVersion, fields[0])
	}
	if len(fields) != 1+len(want) {
		return w, fmt.Errorf("parse where: %d fields, want %d", len(fields), 1+len(want))
	}
	vals := make([]string, len(want))
	for i, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k != want[i] {
			return w, fmt.Errorf("parse where: field %d is %.24q, want %s=…", i+1, f, want[i])
		}
		vals[i] = v
	}
	if !isBootID(vals[0]) {
		return w, fmt.Errorf("parse where: boot=%.40q is not a boot id", vals[0])
	}
	w.Boot = vals[0]
	var endFD uint64
	nums := []struct {
		dst      *uint64
		min, max uint64
	}{
		{&w.PIDNS, 1, 1<<64 - 1},
		{nil, 1, maxPid}, // pid
		{&w.Start, 0, 1<<64 - 1},
		{nil, 1, maxPid}, // child
		{&w.ChildStart, 0, 1<<64 - 1},
		{nil, 1, maxPid}, // pgid
	}
	if len(want) > len(keys) {
		nums = append(nums, []struct {
			dst      *uint64
			min, max uint64
		}{
			{&endFD, 0, maxFD},
			{&w.EndIno, 1, 1<<64 - 1},
		}...)
	}
	var pids []int
	for i, n := range nums {
		k, v := want[1+i], vals[1+i]
		u, err := parseDecimal(v)
		if err != nil || u < n.min || u > n.max {
			return w, fmt.Errorf("parse where: %s=%.24q is not a number from %d to %d", k, v, n.min, n.max)
		}
		if n.dst != nil {
			*n.dst = u
		} else {
			pids = append(pids, int(u))
		}
	}
	w.Pid, w.Child, w.Pgid, w.EndFD = pids[0], pids[1], pids[2], int(endFD)
	if w.Child == w.Pid {
		return Where{}, fmt.Errorf("parse where: the command's pid %d is the holder's", w.Child)
	}
	return w, nil
}

// parseDecimal parses digits only, without sign or leading zeros.
func parseDecimal(s string) (uint64, error) {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return 0, strconv.ErrSyntax
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, strconv.ErrSyntax
		}
	}
	return strconv.ParseUint(s, 10, 64)
}

// isBootID reports whether s has the form of the kernel's boot id:
// 8-4-4-4-12 lowercase hexadecimal digits.
func isBootID(s string) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
				return false
			}
		}
	}
	return true
}
