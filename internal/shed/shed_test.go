package shed

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// exeRSS sums the Rss, in kB, of this process's read-only mappings of its
// executable, from /proc/self/smaps.
func exeRSS(t *testing.T) int {
	t.Helper()
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	total, in := 0, false
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && strings.Contains(f[0], "-") && len(f[1]) == 4:
			in = f[1][1] != 'w' && strings.HasSuffix(line, " "+exe)
		case in && len(f) >= 2 && f[0] == "Rss:":
			n, _ := strconv.Atoi(f[1])
			total += n
		}
	}
	return total
}

// TestExecutableDropsResidentPages: the executable's read-only pages that
// the test binary touched while starting are no longer resident after
// Executable, but those it touches again come back.
func TestExecutableDropsResidentPages(t *testing.T) {
	before := exeRSS(t)
	if before == 0 {
		t.Fatal("no resident pages of the executable to begin with")
	}
	Executable()
	after := exeRSS(t)
	t.Logf("resident read-only pages of the executable: %d kB before, %d kB after", before, after)
	if after >= before {
		t.Errorf("%d kB of the executable resident after Executable, %d kB before: nothing dropped", after, before)
	}
}
