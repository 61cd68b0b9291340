package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/leaderrun/leaderrun/internal/testenv/cgrouptest"
)

// inOwnCgroup runs the tests in a cgroup of the test binary's own
// (cgrouptest.Enter), where the scripts' leaderruns make their commands'
// cgroups: a leaderrun reclaims what dead leaderruns left in its own
// cgroup's directory, and no other leaderrun on the host may do that work
// for a script that checks what dies with a killed one. Where cgroups
// cannot be made, the tests run where they were started.
type inOwnCgroup struct{ m *testing.M }

func (c inOwnCgroup) Run() int {
	leave, err := cgrouptest.Enter()
	if err != nil && os.Geteuid() == 0 {
		fmt.Fprintf(os.Stderr, "the tests run in no cgroup of their own: %v\n", err)
	}
	defer leave()
	return c.m.Run()
}
