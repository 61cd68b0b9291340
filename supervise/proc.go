package supervise

import (
	"os"
	"strconv"
	"strings"

	"github.com/leaderrun/leaderrun/internal/procstat"
)

// listChildren returns the pids of this process's children, zombies
// included, from /proc/self/task/*/children. Where the kernel lacks that file
// (CONFIG_PROC_CHILDREN), it scans /proc/*/stat for our pid as ppid.
func listChildren() []int {
	self := strconv.Itoa(os.Getpid())
	if _, err := os.Stat("/proc/self/task/" + self + "/children"); err != nil {
		return scanChildren(os.Getpid())
	}
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return scanChildren(os.Getpid())
	}
	var pids []int
	for _, task := range tasks {
		// A thread that exits meanwhile has no file; its children
		// move to another thread and are found on the next sweep.
		data, err := os.ReadFile("/proc/self/task/" + task.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(data)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// scanChildren returns the pids whose /proc/<pid>/stat names ppid as parent.
func scanChildren(ppid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := procstat.Read(pid); err == nil && st.PPid == ppid {
			pids = append(pids, pid)
		}
	}
	return pids
}
