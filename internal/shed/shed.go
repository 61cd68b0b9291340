// Package shed gives back the resident pages of a running program's own
// executable that it no longer needs.
package shed

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// Executable drops this process's resident pages of its executable's
// read-only mappings (code and read-only data): they stay in the page
// cache (or the memfd the program runs from), and the few that the
// process touches again come back on the next access, as minor faults. A
// Go program touches most of its executable while it starts (the package
// initialisers, the runtime's tables) and little of it afterwards, so a
// long-running process calls this once it has started. Writable mappings
// are left alone: their pages may hold the process's own changes. It is
// best effort.
func Executable() {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(maps), "\n") {
		// START-END PERMS OFFSET DEV INODE PATH
		f := strings.SplitN(line, " ", 6)
		if len(f) < 6 || len(f[1]) < 2 || f[1][1] == 'w' || strings.TrimLeft(f[5], " ") != exe {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if !ok || err1 != nil || err2 != nil || end <= start {
			continue
		}
		syscall.Syscall(syscall.SYS_MADVISE, uintptr(start), uintptr(end-start), syscall.MADV_DONTNEED)
	}
}
