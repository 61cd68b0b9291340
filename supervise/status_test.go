package supervise

import (
	"syscall"
	"testing"
)

func TestStatus(t *testing.T) {
	for _, tt := range []struct {
		st   Status
		str  string
		code int
	}{
		{Status{}, "exit status 0", 0},
		{Status{Code: 3}, "exit status 3", 3},
		{Status{Signal: syscall.SIGTERM}, "killed by SIGTERM", 143},
		{Status{Signal: syscall.SIGKILL}, "killed by SIGKILL", 137},
	} {
		if got, want := tt.st.String(), tt.str; got != want {
			t.Errorf("%#v.String() = %q, want %q", tt.st, got, want)
		}
		if got, want := tt.st.ExitCode(), tt.code; got != want {
			t.Errorf("%#v.ExitCode() = %d, want %d", tt.st, got, want)
		}
	}
}

// TestReraise checks that a process calling Reraise dies by the same signal,
// including signals the Go runtime would otherwise ignore or trap.
func TestReraise(t *testing.T) {
	for _, sig := range []syscall.Signal{
		syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT,
		syscall.SIGUSR1, syscall.SIGUSR2, syscall.SIGALRM, syscall.SIGSEGV,
		syscall.SIGABRT, syscall.SIGKILL,
	} {
		t.Run(sig.String(), func(t *testing.T) {
			c := startHelper(t, Spec{}, "reraise", itoa(int(sig)))
			if got, want := waitDone(t, c), (Status{Signal: sig}); got != want {
				t.Errorf("status after Reraise = %v, want %v", got, want)
			}
		})
	}
}

func TestReraiseExitIsNoop(t *testing.T) {
	Reraise(Status{Code: 3}) // must return
}
