package supervise

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

func TestExitCode(t *testing.T) {
	for _, code := range []string{"0", "3"} {
		t.Run(code, func(t *testing.T) {
			c := startHelper(t, Spec{}, "exit", code)
			st := waitDone(t, c)
			if got, want := st.String(), "exit status "+code; got != want {
				t.Errorf("Status() = %q, want %q", got, want)
			}
			if got, want := st.Signal, syscall.Signal(0); got != want {
				t.Errorf("Status().Signal = %v, want %v", got, want)
			}
		})
	}
}

func TestKilledBySignal(t *testing.T) {
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	c := startHelper(t, Spec{}, "sleep", ready)
	waitFile(t, ready)
	if err := c.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	st := waitDone(t, c)
	if got, want := st, (Status{Signal: syscall.SIGKILL}); got != want {
		t.Errorf("Status() = %v, want %v", got, want)
	}
	if got, want := st.ExitCode(), 137; got != want {
		t.Errorf("ExitCode() = %d, want %d", got, want)
	}
}

func TestStartErrors(t *testing.T) {
	dir := t.TempDir()
	plain := filepath.Join(dir, "plain")
	if err := os.WriteFile(plain, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage")
	if err := os.WriteFile(garbage, []byte("not a program\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		spec Spec
		want error
	}{
		{"missing path", Spec{Path: filepath.Join(dir, "missing")}, ErrNotFound},
		{"missing in PATH", Spec{Path: "leaderrun-no-such-command", Env: []string{"PATH=" + dir}}, ErrNotFound},
		{"empty", Spec{Path: ""}, ErrNotFound},
		{"not executable", Spec{Path: plain}, ErrNotExecutable},
		{"not executable in PATH", Spec{Path: "plain", Env: []string{"PATH=" + dir}}, ErrNotExecutable},
		{"directory", Spec{Path: dir}, ErrNotExecutable},
		{"not a program", Spec{Path: garbage}, ErrNotExecutable},
		{"relative to Dir", Spec{Path: "./missing", Dir: dir}, ErrNotFound},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Start(tt.spec)
			if err == nil {
				c.Stop()
				t.Fatalf("Start succeeded, want %v", tt.want)
			}
			if !errors.Is(err, tt.want) {
				t.Errorf("Start error = %v, want %v", err, tt.want)
			}
			if got, want := err.Error(), `start "`+tt.spec.Path+`": `; !strings.HasPrefix(got, want) {
				t.Errorf("Start error = %q, want prefix %q", got, want)
			}
		})
	}
}

func TestLookPathUsesSpecEnv(t *testing.T) {
	dir := t.TempDir()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(exe, filepath.Join(dir, "helper")); err != nil {
		t.Fatal(err)
	}
	c, err := Start(Spec{
		Path: "helper",
		Args: []string{"helper", "7"},
		Env:  helperEnviron([]string{"PATH=" + dir}, "exit"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := waitDone(t, c).Code, 7; got != want {
		t.Errorf("exit code = %d, want %d", got, want)
	}
}

func TestEnvStripped(t *testing.T) {
	out := filepath.Join(t.TempDir(), "env")
	env := append(os.Environ(), "NOTIFY_SOCKET=/run/notify", "WATCHDOG_USEC=1000", "WATCHDOG_PID=1", "KEEP=me",
		tagEnv+"=outer") // an outer supervisor's tag
	c := startHelper(t, Spec{Env: env}, "env", out)
	waitDone(t, c)
	got := strings.Split(waitFile(t, out), "\n")
	for _, kv := range got {
		key, _, _ := strings.Cut(kv, "=")
		if slices.Contains(strippedEnv, key) && kv != tagEnv+"="+c.tag {
			t.Errorf("child environment has %s", kv)
		}
	}
	if !slices.Contains(got, tagEnv+"="+c.tag) {
		t.Errorf("child environment lacks its own tag %s=%s", tagEnv, c.tag)
	}
	if !slices.Contains(got, "KEEP=me") {
		t.Errorf("child environment lacks KEEP=me")
	}
}

func TestSignalReachesChild(t *testing.T) {
	dir := t.TempDir()
	log, ready := filepath.Join(dir, "signals"), filepath.Join(dir, "ready")
	c := startHelper(t, Spec{}, "record", log, ready)
	waitFile(t, ready)
	if err := c.Signal(syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "SIGUSR1 recorded", func() bool {
		data, _ := os.ReadFile(log)
		return strings.Contains(string(data), "SIGUSR1\n")
	})
	st, _ := stopWithin(t, c)
	if got, want := st, (Status{}); got != want {
		t.Errorf("Stop() = %v, want %v (helper exits 0 on SIGTERM)", got, want)
	}
	data, _ := os.ReadFile(log)
	if got, want := string(data), "SIGUSR1\nSIGTERM\n"; got != want {
		t.Errorf("recorded signals = %q, want %q", got, want)
	}
}

func TestSignalAfterDoneIsNoop(t *testing.T) {
	c := startHelper(t, Spec{}, "exit", "0")
	waitDone(t, c)
	if err := c.Signal(syscall.SIGKILL); err != nil {
		t.Errorf("Signal after Done = %v, want nil", err)
	}
}
