package samehost

import (
	"errors"
	"fmt"
	"path"
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
	// EndPath and EndIno name the holder's EndSignal: the path of its
	// FIFO and the FIFO's inode; EndIno is 0 when it has none.
	EndPath string
	EndIno  uint64
}

// version is the first word of an encoded Where, versionEnd that of one
// with an EndSignal. A decoder refuses any other: a follower that does not
// know a newer format falls back to the lease's expiry. versionPipe was
// the form of a leaderrun whose end signal was a pipe that followers
// opened through /proc/PID/fd: Parse still reads it, for the holder and
// its command, but drops its end signal (such a holder's graceful
// hand-over reaches the follower through the store).
const (
	version     = "v1"
	versionPipe = "v2"
	versionEnd  = "v3"
)

// maxWhere bounds an encoded Where; a longer one is refused unread.
const maxWhere = 512

// maxEndPath bounds an EndSignal's path.
const maxEndPath = 256

// maxPid is the kernel's PID_MAX_LIMIT: no pid is larger.
const maxPid = 1 << 22

// maxFD is the kernel's NR_OPEN: no file descriptor is larger.
const maxFD = 1<<20 - 1

// keys are the encoding's fields after the version, in their only order;
// versionEnd adds endKeys, versionPipe pipeKeys.
var (
	keys     = []string{"boot", "pidns", "pid", "start", "child", "child_start", "pgid"}
	endKeys  = []string{"end_ino", "end_path"}
	pipeKeys = []string{"end_fd", "end_ino"}
)

// String encodes w as "v1 boot=… pidns=… pid=… start=… child=…
// child_start=… pgid=…", or with an EndSignal as "v3 …" followed by
// " end_ino=… end_path=…": the forms Parse reads.
func (w Where) String() string {
	s := fmt.Sprintf("boot=%s pidns=%d pid=%d start=%d child=%d child_start=%d pgid=%d",
		w.Boot, w.PIDNS, w.Pid, w.Start, w.Child, w.ChildStart, w.Pgid)
	if w.EndIno == 0 {
		return version + " " + s
	}
	return fmt.Sprintf("%s %s end_ino=%d end_path=%s", versionEnd, s, w.EndIno, w.EndPath)
}

// ErrVersion is wrapped by Parse's error for a Where in a format this
// leaderrun does not know (written by a newer one).
var ErrVersion = errors.New("unknown format version")

// Parse decodes what String encodes, and nothing else: the version, then
// every key once, in order, separated by single spaces; a boot id in the
// kernel's form (36 lowercase hexadecimal digits and dashes); decimal
// numbers without sign or leading zeros, pids between 1 and the kernel's
// limit, a PID namespace inode other than 0, a command that is not the
// holder itself, an end signal's path that validEndPath accepts. Anything
// a store holds may have been written by anyone with access to it, so
// Parse trusts nothing (and a follower checks what the path names before
// it opens it: openEnd).
func Parse(s string) (Where, error) {
	var w Where
	if len(s) > maxWhere {
		return w, fmt.Errorf("parse where: %d bytes, more than %d", len(s), maxWhere)
	}
	fields := strings.Split(s, " ")
	want := keys
	switch fields[0] {
	case version:
	case versionPipe:
		want = append(slices.Clip(keys), pipeKeys...)
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
	var endFD, endIno uint64 // versionPipe's, dropped
	if fields[0] == versionEnd {
		p := vals[len(vals)-1]
		if !validEndPath(p) {
			return w, fmt.Errorf("parse where: end_path=%.40q is not a clean absolute path of printable characters", p)
		}
		w.EndPath = p
	}
	type num = struct {
		dst      *uint64
		min, max uint64
	}
	nums := []num{
		{&w.PIDNS, 1, 1<<64 - 1},
		{nil, 1, maxPid}, // pid
		{&w.Start, 0, 1<<64 - 1},
		{nil, 1, maxPid}, // child
		{&w.ChildStart, 0, 1<<64 - 1},
		{nil, 1, maxPid}, // pgid
	}
	switch fields[0] {
	case versionEnd:
		nums = append(nums, num{&w.EndIno, 1, 1<<64 - 1})
	case versionPipe:
		nums = append(nums, num{&endFD, 0, maxFD}, num{&endIno, 1, 1<<64 - 1})
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
	w.Pid, w.Child, w.Pgid = pids[0], pids[1], pids[2]
	if w.Child == w.Pid {
		return Where{}, fmt.Errorf("parse where: the command's pid %d is the holder's", w.Child)
	}
	return w, nil
}

// validEndPath reports whether p may name an EndSignal: absolute and
// clean, at most maxEndPath bytes of printable ASCII without spaces.
func validEndPath(p string) bool {
	if len(p) < 2 || len(p) > maxEndPath || p[0] != '/' || path.Clean(p) != p {
		return false
	}
	for i := 0; i < len(p); i++ {
		if p[i] <= ' ' || p[i] > '~' {
			return false
		}
	}
	return true
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
