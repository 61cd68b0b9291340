package cmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/config"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/replica"
	"github.com/leaderrun/leaderrun/supervise"
)

func TestExitCode(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{usagef("unexpected argument %q", "x"), ExitUsage},
		{fmt.Errorf("validate: %w", &config.FieldError{Option: "--ttl"}), ExitUsage},
		{fmt.Errorf("open store: %w", lease.ErrRefused), ExitUsage},
		{&replica.ConfigError{Err: errors.New("run in the other mode")}, ExitUsage},
		{fmt.Errorf("lease %q: %w", "x", replica.ErrAcquireTimeout), ExitAcquireTimeout},
		{fmt.Errorf("step-down of %q: %w", "x", errNoNewLeader), ExitAcquireTimeout},
		{fmt.Errorf("lease %q: nobody holds it: %w", "x", errStepDownRefused), ExitFailure},
		{fmt.Errorf("lease %q: %w", "x", errNoSuchLease), ExitNoSuchLease},
		{fmt.Errorf("open store: %w", lease.ErrNoStore), ExitNoSuchLease},
		{fmt.Errorf("start %q: %w", "x", supervise.ErrNotFound), ExitNotFound},
		{fmt.Errorf("start %q: %w", "x", supervise.ErrNotExecutable), ExitNotExecutable},
		{context.Canceled, ExitOK},
		{errors.New("store unreachable"), ExitFailure},
	}
	for _, tc := range tests {
		if got := exitCode(tc.err); got != tc.want {
			t.Errorf("exitCode(%v) = %d, want %d", tc.err, got, tc.want)
		}
	}
}

func TestSplitCommand(t *testing.T) {
	tests := []struct {
		args, own, command []string
	}{
		{[]string{"leaderrun", "--name", "x", "--", "status", "--json"}, []string{"leaderrun", "--name", "x"}, []string{"status", "--json"}},
		{[]string{"leaderrun", "--name", "x", "--", "a", "--", "b"}, []string{"leaderrun", "--name", "x"}, []string{"a", "--", "b"}},
		{[]string{"leaderrun", "version"}, []string{"leaderrun", "version"}, nil},
		{[]string{"leaderrun", "--name", "x", "--"}, []string{"leaderrun", "--name", "x"}, []string{}},
	}
	for _, tc := range tests {
		own, command := splitCommand(tc.args)
		if !slices.Equal(own, tc.own) || !slices.Equal(command, tc.command) {
			t.Errorf("splitCommand(%q) = %q, %q; want %q, %q", tc.args, own, command, tc.own, tc.command)
		}
	}
}

func TestReadStoreFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		return p
	}
	fifo := filepath.Join(dir, "fifo")
	if err := unix.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, want, err, warning string
	}{
		{"one line", write("a", "postgres://u@h/db\n", 0o600), "postgres://u@h/db", "", ""},
		{"no final newline, spaces", write("b", "  sqlite:/x.db \r", 0o600), "sqlite:/x.db", "", ""},
		{"a byte order mark", write("c", "\uFEFFsqlite:/x.db\nsecond", 0o600), "sqlite:/x.db", "", ""},
		{"a blank first line", write("d", "\nsqlite:/x.db\n", 0o600), "", "first line is empty", ""},
		{"readable by others", write("e", "sqlite:/x.db\n", 0o644), "sqlite:/x.db", "", "readable by users other than its owner"},
		{"a FIFO without a writer", fifo, "", "not a regular file", ""},
		{"/dev/zero", "/dev/zero", "", "not a regular file", ""},
		{"a line too long", write("f", strings.Repeat("x", maxStoreFileLine+10), 0o600), "", "no line break", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			done := make(chan struct{})
			var dsn, warning string
			var err error
			go func() { dsn, warning, err = readStoreFile(tc.path); close(done) }()
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				t.Fatal("readStoreFile blocked")
			}
			switch {
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("err = %v, want one saying %q", err, tc.err)
			case tc.err == "" && err != nil:
				t.Errorf("err = %v", err)
			case dsn != tc.want:
				t.Errorf("dsn = %q, want %q", dsn, tc.want)
			case !strings.Contains(warning, tc.warning) || (tc.warning == "" && warning != ""):
				t.Errorf("warning = %q, want %q", warning, tc.warning)
			}
		})
	}
}

// A pipe whose reader has gone (status | head, watch | head) ends a
// command quietly, with the status SIGPIPE gives other programs. Before,
// status printed "write /dev/stdout: broken pipe" and exited 1, and watch
// went on writing into the pipe for ever.
func TestReaderGoneIsQuiet(t *testing.T) {
	dsn := "sqlite://" + filepath.Join(t.TempDir(), "leases.db")
	store, err := lease.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	if _, err := store.Acquire(context.Background(), "relay", "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	for _, command := range []string{"status", "watch"} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
		var stderr strings.Builder
		done := make(chan int, 1)
		go func() { done <- Main(nil, []string{"leaderrun", command, "--store", dsn, "relay"}, w, &stderr) }()
		select {
		case code := <-done:
			if code != 128+int(unix.SIGPIPE) || stderr.Len() > 0 {
				t.Errorf("%s into a closed pipe: exit %d, stderr %q; want %d and nothing", command, code, stderr.String(), 128+int(unix.SIGPIPE))
			}
		case <-time.After(10 * time.Second):
			t.Errorf("%s into a closed pipe still runs after 10s", command)
		}
		w.Close()
	}
}
