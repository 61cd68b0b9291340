package signals

import (
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want syscall.Signal
	}{
		{"TERM", syscall.SIGTERM},
		{"SIGTERM", syscall.SIGTERM},
		{"term", syscall.SIGTERM},
		{"SigTerm", syscall.SIGTERM},
		{"15", syscall.SIGTERM},
		{"9", syscall.SIGKILL},
		{"KILL", syscall.SIGKILL},
		{"hup", syscall.SIGHUP},
		{"USR1", syscall.SIGUSR1},
		{"SIGWINCH", syscall.SIGWINCH},
		{"64", syscall.Signal(64)},
		{"SIG40", syscall.Signal(40)},
	} {
		got, err := Parse(tt.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("Parse(%q) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestParseError(t *testing.T) {
	for _, tt := range []struct {
		in, want string
	}{
		{"FOO", `unknown signal "FOO"`},
		{"SIGFOO", `unknown signal "SIGFOO"`},
		{"", `unknown signal ""`},
		{"0", `unknown signal "0"`},
		{"65", `unknown signal "65"`},
		{"-15", `unknown signal "-15"`},
		{"SIG", `unknown signal "SIG"`},
		{" TERM", `unknown signal " TERM"`},
	} {
		_, err := Parse(tt.in)
		if err == nil {
			t.Errorf("Parse(%q) succeeded, want error %q", tt.in, tt.want)
			continue
		}
		if got := err.Error(); got != tt.want {
			t.Errorf("Parse(%q) error = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestName(t *testing.T) {
	for _, tt := range []struct {
		sig  syscall.Signal
		want string
	}{
		{syscall.SIGTERM, "SIGTERM"},
		{syscall.SIGKILL, "SIGKILL"},
		{syscall.SIGUSR2, "SIGUSR2"},
		{syscall.SIGWINCH, "SIGWINCH"},
		{syscall.Signal(40), "SIG40"},
	} {
		if got := Name(tt.sig); got != tt.want {
			t.Errorf("Name(%d) = %q, want %q", int(tt.sig), got, tt.want)
		}
	}
}

func TestNameParseRoundTrip(t *testing.T) {
	for n := 1; n <= maxSignal; n++ {
		sig := syscall.Signal(n)
		got, err := Parse(Name(sig))
		if err != nil {
			t.Errorf("Parse(Name(%d)): %v", n, err)
			continue
		}
		if got != sig {
			t.Errorf("Parse(%q) = %d, want %d", Name(sig), int(got), n)
		}
	}
}

func TestIsStop(t *testing.T) {
	for _, tt := range []struct {
		sig  syscall.Signal
		want bool
	}{
		{syscall.SIGTERM, true},
		{syscall.SIGINT, true},
		{syscall.SIGQUIT, true},
		{syscall.SIGHUP, true},
		{syscall.SIGUSR1, false},
		{syscall.SIGUSR2, false},
		{syscall.SIGWINCH, false},
		{syscall.SIGCONT, false},
		{syscall.SIGALRM, false},
		{syscall.SIGCHLD, false},
	} {
		if got := IsStop(tt.sig); got != tt.want {
			t.Errorf("IsStop(%s) = %v, want %v", Name(tt.sig), got, tt.want)
		}
	}
}

func TestForwarded(t *testing.T) {
	forwarded := make(map[os.Signal]bool)
	for _, sig := range Forwarded {
		forwarded[sig] = true
	}
	for _, tt := range []struct {
		sig  syscall.Signal
		want bool
	}{
		{syscall.SIGHUP, true},
		{syscall.SIGINT, true},
		{syscall.SIGQUIT, true},
		{syscall.SIGTERM, true},
		{syscall.SIGUSR1, true},
		{syscall.SIGUSR2, true},
		{syscall.SIGWINCH, true},
		{syscall.SIGCONT, true},
		{syscall.SIGALRM, true},
		{syscall.SIGCHLD, false},
		{syscall.SIGURG, false},
		{syscall.SIGPIPE, false},
		{syscall.SIGTTIN, false},
		{syscall.SIGTTOU, false},
		{syscall.SIGKILL, false},
		{syscall.SIGSTOP, false},
	} {
		if got := forwarded[tt.sig]; got != tt.want {
			t.Errorf("%s forwarded = %v, want %v", Name(tt.sig), got, tt.want)
		}
	}
	if got, want := len(Forwarded), 9; got != want {
		t.Errorf("len(Forwarded) = %d, want %d", got, want)
	}
}

// TestNotify checks that a forwarded signal sent to this process arrives on
// the channel and that an unlisted one (SIGURG, which the runtime also uses)
// does not.
func TestNotify(t *testing.T) {
	c := make(chan os.Signal, 16)
	Notify(c)
	defer signal.Stop(c)

	if err := syscall.Kill(os.Getpid(), syscall.SIGURG); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	timeout := time.After(5 * time.Second)
	for {
		select {
		case sig := <-c:
			if sig == syscall.SIGURG {
				t.Fatalf("received SIGURG, which is not forwarded")
			}
			if sig == syscall.SIGUSR1 {
				return
			}
		case <-timeout:
			t.Fatal("SIGUSR1 not received within 5s")
		}
	}
}
