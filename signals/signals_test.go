package signals

import (
	"os"
	"os/signal"
	"strings"
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
		{syscall.SIGPWR, true},
		{syscall.SIGSEGV, true},
		{syscall.SIGABRT, true},
		{syscall.SIGCHLD, false},
		{syscall.SIGURG, false},
		{syscall.SIGPIPE, false},
		{syscall.SIGTTIN, false},
		{syscall.SIGTTOU, false},
		{syscall.SIGTSTP, false},
		{syscall.SIGKILL, false},
		{syscall.SIGSTOP, false},
		{syscall.SIGPROF, false},
	} {
		if got := forwarded[tt.sig]; got != tt.want {
			t.Errorf("%s forwarded = %v, want %v", Name(tt.sig), got, tt.want)
		}
	}
}

// TestEveryCaughtSignalHasAnAction: each signal from 1 to 31 has one
// action, and the Go runtime's fault signals are forwarded, never left to
// it (it would crash with a stack dump).
func TestEveryCaughtSignalHasAnAction(t *testing.T) {
	counts := map[Action]int{}
	for n := syscall.Signal(1); n <= 31; n++ {
		counts[DefaultStopOn.Action(n)]++
	}
	want := map[Action]int{Kernel: 4, Forward: 17, Stop: 3, Suspend: 1, Ignore: 6}
	for a, n := range want {
		if counts[a] != n {
			t.Errorf("%d signals %s, want %d", counts[a], a, n)
		}
	}
	for _, sig := range []syscall.Signal{syscall.SIGILL, syscall.SIGTRAP, syscall.SIGABRT, syscall.SIGBUS,
		syscall.SIGFPE, syscall.SIGSEGV, syscall.SIGSTKFLT, syscall.SIGSYS} {
		if got := DefaultStopOn.Action(sig); got != Forward {
			t.Errorf("%s: %s, want forward", Name(sig), got)
		}
	}
}

func TestStopOn(t *testing.T) {
	for _, tt := range []struct {
		in   string
		stop []syscall.Signal
		fwd  []syscall.Signal
	}{
		{"INT,TERM,PWR", []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGPWR}, []syscall.Signal{syscall.SIGHUP, syscall.SIGQUIT}},
		{"HUP,TERM", []syscall.Signal{syscall.SIGHUP, syscall.SIGTERM}, []syscall.Signal{syscall.SIGINT, syscall.SIGPWR, syscall.SIGQUIT}},
		{"sighup, 15", []syscall.Signal{syscall.SIGHUP, syscall.SIGTERM}, []syscall.Signal{syscall.SIGINT}},
		{"QUIT", []syscall.Signal{syscall.SIGQUIT}, []syscall.Signal{syscall.SIGTERM}},
	} {
		s, err := ParseStopOn(tt.in)
		if err != nil {
			t.Errorf("ParseStopOn(%q): %v", tt.in, err)
			continue
		}
		for _, sig := range tt.stop {
			if got := s.Action(sig); got != Stop {
				t.Errorf("ParseStopOn(%q).Action(%s) = %s, want stop", tt.in, Name(sig), got)
			}
		}
		for _, sig := range tt.fwd {
			if got := s.Action(sig); got != Forward {
				t.Errorf("ParseStopOn(%q).Action(%s) = %s, want forward", tt.in, Name(sig), got)
			}
		}
	}
	if got, want := DefaultStopOn.String(), "INT,TERM,PWR"; got != want {
		t.Errorf("DefaultStopOn = %q, want %q", got, want)
	}
	if got, want := (StopOn{}).Action(syscall.SIGTERM), Stop; got != want {
		t.Errorf("zero StopOn: SIGTERM %s, want %s", got, want)
	}
}

func TestParseStopOnError(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"", `"": unknown signal ""`},
		{"HUP,FOO", `"HUP,FOO": unknown signal "FOO"`},
		{"TERM,", `"TERM,": unknown signal ""`},
		{"KILL", `"KILL": SIGKILL cannot stop leaderrun (kernel default); give signals it forwards: `},
		{"TSTP", `"TSTP": SIGTSTP cannot stop leaderrun (suspend)`},
		{"CHLD", `"CHLD": SIGCHLD cannot stop leaderrun (ignore)`},
		{"40", `"40": SIG40 cannot stop leaderrun (kernel default)`},
	} {
		_, err := ParseStopOn(tt.in)
		if err == nil {
			t.Errorf("ParseStopOn(%q) succeeded, want error %q", tt.in, tt.want)
			continue
		}
		if got := err.Error(); !strings.HasPrefix(got, tt.want) {
			t.Errorf("ParseStopOn(%q) error = %q, want it to begin %q", tt.in, got, tt.want)
		}
	}
}

func TestPassOn(t *testing.T) {
	for _, tt := range []struct{ received, stop, want syscall.Signal }{
		{syscall.SIGINT, syscall.SIGTERM, syscall.SIGINT},
		{syscall.SIGTERM, syscall.SIGINT, syscall.SIGTERM},
		{syscall.SIGPWR, syscall.SIGTERM, syscall.SIGTERM},
		{syscall.SIGHUP, syscall.SIGTERM, syscall.SIGTERM},
		{syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR1},
	} {
		if got := PassOn(tt.received, tt.stop); got != tt.want {
			t.Errorf("PassOn(%s, %s) = %s, want %s", Name(tt.received), Name(tt.stop), Name(got), Name(tt.want))
		}
	}
}

// TestREADMESignalTable: the signal table of docs/signals.md (the README's
// until the README linked to that page; its markers keep this test's name)
// is the one WriteTable gives, so that it cannot drift from the code.
func TestREADMESignalTable(t *testing.T) {
	const page = "../docs/signals.md"
	text, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- signal table: generated by signals.WriteTable; TestREADMESignalTable keeps it equal -->\n", "<!-- end of signal table -->"
	_, rest, ok := strings.Cut(string(text), begin)
	table, _, ok2 := strings.Cut(rest, end)
	if !ok || !ok2 {
		t.Fatalf("%s has no signal table between %q and %q", page, begin, end)
	}
	var want strings.Builder
	if err := WriteTable(&want, DefaultStopOn); err != nil {
		t.Fatal(err)
	}
	if table != want.String() {
		t.Errorf("%s's signal table differs from the code's; paste this between the markers:\n%s", page, want.String())
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
