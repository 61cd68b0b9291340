package supervise

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/leaderrun/leaderrun/internal/nsinit"
)

// The command must not be able to forge its own end (issue 32, item 2):
// the status pipe between a namespace's init and this process is the
// init's alone.

// TestPIDNamespaceCommandHasNoStatusPipe: descriptor 3 of the command is
// not the status pipe (the helper records what it is, and exits 7).
func TestPIDNamespaceCommandHasNoStatusPipe(t *testing.T) {
	requireNamespaces(t)
	file := filepath.Join(t.TempDir(), "fd3")
	c := startHelper(t, Spec{Namespace: PIDNamespace}, "fd3", file)
	if got, want := waitDone(t, c), (Status{Code: 7}); got != want {
		t.Errorf("status %v, want %v", got, want)
	}
	if what := waitFile(t, file); strings.HasPrefix(what, "pipe:") {
		t.Errorf("the command inherited a pipe as descriptor 3 (%s): the init's status pipe", what)
	}
}

// startShell starts sh -c script in a PID namespace.
func startShell(t *testing.T, script string) *Child {
	t.Helper()
	null, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { null.Close() })
	c, err := Start(Spec{Path: "sh", Args: []string{"sh", "-c", script}, Env: os.Environ(),
		Namespace: PIDNamespace, Stdin: null, Stdout: null, Stderr: null})
	if err != nil {
		t.Fatalf("Start(sh -c %q): %v", script, err)
	}
	t.Cleanup(func() { c.Stop() })
	return c
}

// TestPIDNamespaceCommandCannotForgeItsEnd runs the reproductions of the
// issue: whatever the command writes to descriptor 3, its own exit code
// is what Start reports, and the report neither hangs nor panics.
func TestPIDNamespaceCommandCannotForgeItsEnd(t *testing.T) {
	requireNamespaces(t)
	for _, tc := range []struct {
		name, script string
		code         int
	}{
		{"exit-0-forged", `echo "0 0" >&3; exit 7`, 7},
		{"flood", `head -c 65536 /dev/zero >&3; exit 5`, 5},
		{"signal-out-of-range", `echo "0 99999" >&3; exit 4`, 4},
		{"sigstop", `echo "0 19" >&3; exit 6`, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := startShell(t, tc.script)
			if got, want := waitDone(t, c), (Status{Code: tc.code}); got != want {
				t.Errorf("sh -c %q: status %v, want %v", tc.script, got, want)
			}
		})
	}
}

// TestNamespaceStatusReportIsChecked feeds the parent's end of the status
// pipe what a broken or hostile writer could: only one line with a code
// of 0–255 or a signal that can end a process is taken; anything else
// leaves the init's own status (the fallback), and a flood is not read
// to its end.
func TestNamespaceStatusReportIsChecked(t *testing.T) {
	fallback := Status{Code: 42}
	for _, tc := range []struct {
		name, report string
		want         Status
	}{
		{"exit", "7 0\n", Status{Code: 7}},
		{"exit-255", "255 0\n", Status{Code: 255}},
		{"signal", "0 15\n", Status{Signal: syscall.SIGTERM}},
		{"signal-64", "0 64\n", Status{Signal: 64}},
		{"none", "", fallback},
		{"signal-out-of-range", "0 99999\n", fallback},
		{"signal-0-64-bit", "0 18446744073709551615\n", fallback},
		{"negative-signal", "0 -9\n", fallback},
		{"sigstop", "0 19\n", fallback},
		{"sigtstp", "0 20\n", fallback},
		{"sigcont", "0 18\n", fallback},
		{"sigchld", "0 17\n", fallback},
		{"code-out-of-range", "256 0\n", fallback},
		{"negative-code", "-1 0\n", fallback},
		{"code-and-signal", "3 15\n", fallback},
		{"two-reports", "0 0\n7 0\n", fallback},
		{"no-newline", "7 0", fallback},
		{"extra-field", "7 0 1\n", fallback},
		{"flood", strings.Repeat("0", 65536) + " 0\n", fallback},
		{"started-then-exit", "started 7\n3 0\n", Status{Code: 3}},
		{"started-bad-pid", "started x\n3 0\n", fallback},
		{"started-pid-1", "started 1\n3 0\n", fallback},
		{"started-twice", "started 7\nstarted 8\n3 0\n", fallback},
		{"started-flood", "started " + strings.Repeat("7", 65536) + "\n3 0\n", fallback},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				w.WriteString(tc.report) // fails with EPIPE once the reader gives up on a flood
				w.Close()
			}()
			l := &nsLaunch{status: r, early: nsinit.Ready}
			if got := l.finish(fallback, nil); got != tc.want {
				t.Errorf("report %.40q: status %v, want %v", tc.report, got, tc.want)
			}
		})
	}
}

// TestReraiseRefusesWhatCannotEndAProcess: Reraise of a signal out of
// range, or of one that stops or is ignored by default, returns (the
// helper then exits 99) instead of panicking or stopping this process.
func TestReraiseRefusesWhatCannotEndAProcess(t *testing.T) {
	for _, sig := range []int{99999, 65, int(syscall.SIGSTOP), int(syscall.SIGTSTP), int(syscall.SIGCHLD)} {
		t.Run(itoa(sig), func(t *testing.T) {
			c := startHelper(t, Spec{}, "reraise", itoa(sig))
			if got, want := waitDone(t, c), (Status{Code: 99}); got != want {
				t.Errorf("status after Reraise(%d) = %v, want %v", sig, got, want)
			}
		})
	}
}
