package cmd

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/leaderrun/leaderrun/supervise"
)

// chooseNamespace decides how the command's tree is tied to leaderrun's
// life from --pid-namespace: set and true requires a namespace (an error
// where there is none), set and false turns it off, and unset (the
// default) takes one where it is invisible to an ordinary service and
// otherwise returns a warning that says what survives a SIGKILL and why.
func chooseNamespace(set, want bool) (supervise.Namespace, string, error) {
	if set && !want {
		return supervise.NoNamespace, "", nil
	}
	if !set && supervise.IsInit() {
		// PID 1 already: when leaderrun dies, the kernel kills
		// every process in its namespace.
		return supervise.NoNamespace, "", nil
	}
	ns, err := supervise.ProbeNamespace()
	if set {
		return ns, "", err
	}
	if err != nil {
		return ns, fmt.Sprintf("a process that leaves the command's process group survives a SIGKILL of leaderrun: %v", err), nil
	}
	if amb := ambientCaps(); ns == supervise.UserNamespace && amb != 0 {
		// A user namespace would strip them: a service given
		// CAP_NET_BIND_SERVICE could no longer bind its port.
		return supervise.NoNamespace, fmt.Sprintf("leaderrun has ambient capabilities (%#x) that a user namespace would take from the command, so the command runs without one, and a process that leaves its process group survives a SIGKILL of leaderrun; --pid-namespace forces it", amb), nil
	}
	return ns, "", nil
}

// ambientCaps returns this process's ambient capability set (0 when it
// cannot be read).
func ambientCaps() uint64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "CapAmb:"); ok {
			n, _ := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			return n
		}
	}
	return 0
}
