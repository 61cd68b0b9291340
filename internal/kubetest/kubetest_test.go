//go:build kubernetes

package kubetest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// recorder is a testing.TB that records how a test ended instead of
// ending the test it runs in.
type recorder struct {
	testing.TB
	mu      sync.Mutex // guards the fields below
	skipped string
	fatal   string
}

func (r *recorder) Helper() {}

func (r *recorder) Skip(args ...any) { r.end(&r.skipped, fmt.Sprint(args...)) }
func (r *recorder) Skipf(format string, args ...any) {
	r.end(&r.skipped, fmt.Sprintf(format, args...))
}
func (r *recorder) Fatal(args ...any) { r.end(&r.fatal, fmt.Sprint(args...)) }
func (r *recorder) Fatalf(format string, args ...any) {
	r.end(&r.fatal, fmt.Sprintf(format, args...))
}

func (r *recorder) end(field *string, msg string) {
	r.mu.Lock()
	*field = msg
	r.mu.Unlock()
	panic(r) // unwinds run
}

// run calls f with r, and returns once f returned or ended r's test.
func (r *recorder) run(f func(testing.TB)) {
	defer func() {
		if v := recover(); v != nil && v != r {
			panic(v)
		}
	}()
	f(r)
}

// TestServerThatExitsFailsTheTestWithItsOutput: an API server that exits
// at start (an unknown flag, a port taken) fails the test at once with
// what it printed, instead of skipping it after the ready timeout.
func TestServerThatExitsFailsTheTestWithItsOutput(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip(err)
	}
	fake := filepath.Join(t.TempDir(), "kube-apiserver")
	script := "#!/bin/sh\necho 'Error: unknown flag: --no-such-flag' >&2\nexit 1\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvBinary, fake)
	t.Setenv("CI", "") // outside CI, where a missing server would skip
	t.Setenv(EnvRequire, "")
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.run(func(tb testing.TB) { Start(tb) })
	}()
	select {
	case <-done:
	case <-time.After(readyTimeout + time.Minute):
		t.Fatal("Start never returned")
	}
	if r.skipped != "" {
		t.Fatalf("Start skipped the test: %s; want it failed", r.skipped)
	}
	if !strings.Contains(r.fatal, "unknown flag: --no-such-flag") || !strings.Contains(r.fatal, "exited") {
		t.Errorf("Start failed the test with %q; want the server's output and that it exited", r.fatal)
	}
}
