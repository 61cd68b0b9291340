package kubetest

import (
	"context"
	"fmt"
	"net/http"
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
	t.Setenv(EnvSkip, "") // it needs no real server
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

// TestStartTriesATakenPortAgain: an API server that exits at start because
// its port was taken between Start finding it free and the server binding
// it is started again on new ports, startTries times in all, and then
// fails the test with what it printed.
func TestStartTriesATakenPortAgain(t *testing.T) {
	if _, err := os.Stat("/bin/sh"); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	fake, starts := filepath.Join(dir, "kube-apiserver"), filepath.Join(dir, "starts")
	script := "#!/bin/sh\necho start >>" + starts + "\n" +
		"echo 'failed to listen on 127.0.0.1:40051: listen tcp 127.0.0.1:40051: bind: address already in use' >&2\nexit 1\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(EnvBinary, fake)
	t.Setenv(EnvSkip, "")
	r := &recorder{TB: t}
	r.run(func(tb testing.TB) { Start(tb) })
	if !strings.Contains(r.fatal, "address already in use") {
		t.Errorf("Start failed the test with %q; want the server's output", r.fatal)
	}
	b, err := os.ReadFile(starts)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "start"); n < 2 || n != startTries {
		t.Errorf("the API server was started %d times; want %d (more than one)", n, startTries)
	}
}

// TestRestartServesAtTheSameURL: after Kill and Restart of the API server,
// and of its etcd, the server answers again at its URL, with the objects
// it had.
func TestRestartServesAtTheSameURL(t *testing.T) {
	s := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	ns, err := s.CreateNamespace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []Process{APIServer, Etcd} {
		if err := s.Restart(p); err == nil {
			t.Errorf("Restart(%s) of a running process succeeded; want an error", p)
		}
		if err := s.Kill(p); err != nil {
			t.Fatal(err)
		}
		if got := get(t, s.URL+"/readyz"); p == APIServer && got != 0 {
			t.Errorf("after Kill(%s), /readyz answered %d; want no answer", p, got)
		}
		if err := s.Restart(p); err != nil {
			t.Fatalf("Restart(%s): %v", p, err)
		}
		if got, want := get(t, s.URL+"/api/v1/namespaces/"+ns), http.StatusOK; got != want {
			t.Errorf("after Restart(%s), GET namespace %s answered %d; want %d", p, ns, got, want)
		}
	}
}

// get returns the status of a GET of url as the admin, or 0 when there is
// no answer.
func get(t *testing.T, url string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", url, nil)
	req.Header.Set("Authorization", "Bearer "+AdminToken)
	resp, err := insecureClient.Do(req)
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}
