package sqlite

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/lease"
)

// The test binary doubles as the helper processes of the multi-process
// tests: with helperEnv set, TestMain runs that helper instead of the
// tests. Helpers talk to the test on stdin and stdout, one line at a time.
const (
	helperEnv = "LEADERRUN_SQLITE_TEST_HELPER"
	dbEnv     = "LEADERRUN_SQLITE_TEST_DB"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(helperEnv); mode != "" {
		os.Exit(runHelper(mode, os.Getenv(dbEnv)))
	}
	os.Exit(m.Run())
}

var helpers = map[string]func(ctx context.Context, path string, in *bufio.Scanner) error{
	"race-open":    helperRaceOpen,
	"race-acquire": helperRaceAcquire,
	"hold-and-die": helperHoldAndDie,
	"take-over":    helperTakeOver,
	"wait":         helperWait,
	"hand-over":    helperHandOver,
	"write-lock":   helperWriteLock,
}

func runHelper(mode, path string) int {
	fn := helpers[mode]
	if fn == nil {
		fmt.Fprintf(os.Stderr, "unknown helper %q\n", mode)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := fn(ctx, path, bufio.NewScanner(os.Stdin)); err != nil {
		fmt.Printf("error %v\n", err)
		return 1
	}
	return 0
}

// awaitGo reports readiness and blocks until the test writes a line.
func awaitGo(in *bufio.Scanner) error {
	fmt.Println("ready")
	if !in.Scan() {
		return errors.New("stdin closed before go")
	}
	return nil
}

// helperRaceOpen opens the store on "go" and reads from it.
func helperRaceOpen(ctx context.Context, path string, in *bufio.Scanner) error {
	if err := awaitGo(in); err != nil {
		return err
	}
	s, err := Open(ctx, path, Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	if _, err := s.List(ctx); err != nil {
		return err
	}
	fmt.Println("opened")
	return nil
}

// helperRaceAcquire opens the store, then acquires "race" on "go".
func helperRaceAcquire(ctx context.Context, path string, in *bufio.Scanner) error {
	s, err := Open(ctx, path, Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	if err := awaitGo(in); err != nil {
		return err
	}
	holder := fmt.Sprintf("pid-%d", os.Getpid())
	rec, err := s.Acquire(ctx, "race", holder, time.Minute)
	var held *lease.HeldError
	switch {
	case err == nil:
		fmt.Printf("won %s %d\n", rec.Holder, rec.Token)
	case errors.As(err, &held):
		fmt.Printf("held %s %d\n", held.Record.Holder, held.Record.Token)
	default:
		return err
	}
	return nil
}

// helperHoldAndDie acquires "crash" for a short TTL and dies by SIGKILL,
// leaving the lease to expire.
func helperHoldAndDie(ctx context.Context, path string, in *bufio.Scanner) error {
	s, err := Open(ctx, path, Options{})
	if err != nil {
		return err
	}
	rec, err := s.Acquire(ctx, "crash", "dier", 300*time.Millisecond)
	if err != nil {
		return err
	}
	fmt.Printf("acquired %d %d\n", rec.Token, rec.Expires.UnixNano())
	os.Stdout.Sync()
	syscall.Kill(os.Getpid(), syscall.SIGKILL)
	select {} // the signal ends the process
}

// helperTakeOver campaigns for "crash" until it holds it.
func helperTakeOver(ctx context.Context, path string, in *bufio.Scanner) error {
	s, err := Open(ctx, path, Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	for {
		rec, err := s.Acquire(ctx, "crash", "taker", time.Minute)
		var held *lease.HeldError
		switch {
		case err == nil:
			fmt.Printf("acquired %d %d\n", rec.Token, rec.Acquired.UnixNano())
			return nil
		case errors.As(err, &held):
			fmt.Printf("held %s\n", held.Record.Holder)
			if err := s.Wait(ctx, "crash", held.Record, held.Record.Remaining); err != nil {
				return err
			}
		default:
			return err
		}
	}
}

// helperWait waits for "handoff" to change hands each time the test writes
// a line, and reports when it woke in wall-clock nanoseconds. Each Wait
// lasts a minute, longer than the test waits for its answer: a wake-up
// that does not come fails the test.
func helperWait(ctx context.Context, path string, in *bufio.Scanner) error {
	s, err := Open(ctx, path, Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	waitSubscribed = func() { fmt.Println("waiting") }
	fmt.Println("ready")
	for in.Scan() {
		seen, err := s.Get(ctx, "handoff")
		if err != nil && !errors.Is(err, lease.ErrNotFound) {
			return err
		}
		if err := s.Wait(ctx, "handoff", seen, time.Minute); err != nil {
			return err
		}
		fmt.Printf("woke %d\n", time.Now().UnixNano())
	}
	return nil
}

// helperHandOver acquires "handoff" and releases it each time the test
// writes a line.
func helperHandOver(ctx context.Context, path string, in *bufio.Scanner) error {
	s, err := Open(ctx, path, Options{})
	if err != nil {
		return err
	}
	defer s.Close()
	holder := fmt.Sprintf("pid-%d", os.Getpid())
	fmt.Println("ready")
	for in.Scan() {
		rec, err := s.Acquire(ctx, "handoff", holder, time.Minute)
		if err != nil {
			return err
		}
		if err := s.Release(ctx, "handoff", holder, rec.Token); err != nil {
			return err
		}
		fmt.Println("released")
	}
	return nil
}

// helper is a running helper process.
type helper struct {
	t      *testing.T
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // stdout, line by line; closed at EOF
	stderr bytes.Buffer
	exited chan error // receives cmd.Wait's result
}

// startHelper runs the test binary as helper mode on the database at path.
func startHelper(t *testing.T, name, mode, path string) *helper {
	t.Helper()
	return runHelperCmd(t, name, helperCmd(os.Args[0], mode, path))
}

// startHelperAs is startHelper as user uid, with the supplementary groups
// gids, from a copy of the test binary in bin, a directory that user may
// reach (go test builds the binary in a directory of root's alone).
func startHelperAs(t *testing.T, name, mode, path, bin string, uid uint32, gids []uint32) *helper {
	t.Helper()
	exe := filepath.Join(bin, "sqlite.test")
	if _, err := os.Stat(exe); err != nil {
		data, err := os.ReadFile(os.Args[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(exe, data, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := helperCmd(exe, mode, path)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: uid, Groups: gids}}
	return runHelperCmd(t, name, cmd)
}

// helperCmd is the command that runs the test binary exe as helper mode
// on the database at path.
func helperCmd(exe, mode, path string) *exec.Cmd {
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+mode, dbEnv+"="+path)
	return cmd
}

// runHelperCmd starts the helper process cmd.
func runHelperCmd(t *testing.T, name string, cmd *exec.Cmd) *helper {
	t.Helper()
	h := &helper{t: t, name: name, cmd: cmd, lines: make(chan string, 16), exited: make(chan error, 1)}
	h.cmd.Stderr = &h.stderr
	var err error
	if h.stdin, err = h.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := h.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := h.cmd.Start(); err != nil {
		t.Fatalf("start helper %s: %v", name, err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
		h.exited <- h.cmd.Wait()
	}()
	t.Cleanup(func() {
		h.cmd.Process.Kill()
		h.stdin.Close()
		select {
		case <-h.exited:
		case <-time.After(10 * time.Second):
			t.Errorf("helper %s did not exit", name)
		}
	})
	return h
}

const helperTimeout = 15 * time.Second

// expect returns the helper's next line, which must start with word.
func (h *helper) expect(word string) string {
	h.t.Helper()
	select {
	case line, ok := <-h.lines:
		if !ok {
			h.t.Fatalf("helper %s ended before %q; stderr:\n%s", h.name, word, h.stderr.String())
		}
		if !strings.HasPrefix(line, word) {
			h.t.Fatalf("helper %s said %q, want %q…", h.name, line, word)
		}
		return line
	case <-time.After(helperTimeout):
		h.t.Fatalf("helper %s did not say %q within %v", h.name, word, helperTimeout)
		return ""
	}
}

// send writes a line to the helper's stdin.
func (h *helper) send(line string) {
	h.t.Helper()
	if _, err := io.WriteString(h.stdin, line+"\n"); err != nil {
		h.t.Fatalf("write to helper %s: %v", h.name, err)
	}
}

// wait returns how the helper process ended.
func (h *helper) wait() error {
	h.t.Helper()
	for range h.lines {
	}
	select {
	case err := <-h.exited:
		h.exited <- err // for Cleanup
		return err
	case <-time.After(helperTimeout):
		h.t.Fatalf("helper %s did not exit", h.name)
		return nil
	}
}

// helperWriteLock takes the database's write lock (BEGIN IMMEDIATE) on its
// own connection and holds it until stdin closes.
func helperWriteLock(ctx context.Context, path string, in *bufio.Scanner) error {
	db, err := sql.Open("sqlite", path+"?_busy_timeout=1000")
	if err != nil {
		return err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN IMMEDIATE"); err != nil {
		return err
	}
	fmt.Println("locked")
	for in.Scan() {
	}
	return nil
}
