package e2e

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// earlyPackage is the package whose init subscribes leaderrun to its
// signals, before the packages the rest of the program needs are
// initialized (main imports it).
const earlyPackage = "github.com/leaderrun/leaderrun/internal/earlysig"

// TestStopSignalWhileStartingIsKept sends SIGTERM to the real executable
// while its packages are still being initialized, long before main: a
// replica stopped as it starts (a rollout, chaos's final stop) must exit
// as a stopped standby does, not die of the signal.
//
// The runtime's init trace (GODEBUG=inittrace=1) says when earlysig's
// init has run; it goes to a pipe of one page that the test stops reading
// there, so the process blocks in its next trace lines, its remaining
// inits not run, until the signal has been sent.
func TestStopSignalWhileStartingIsKept(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs leaderrun")
	}
	dir := t.TempDir()
	bin := filepath.Join(dir, "leaderrun")
	build := exec.Command("go", "build", "-o", bin, "..")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // as make test's go build ./..., whose cache it reuses
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build leaderrun: %v\n%s", err, out)
	}
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := unix.FcntlInt(w.Fd(), unix.F_SETPIPE_SZ, os.Getpagesize()); err != nil {
		t.Fatal(err)
	}
	lr := exec.Command(bin, "--name", "early", "--store", "sqlite:"+filepath.Join(dir, "leases.db"),
		"--pid-namespace=false", "--", "sleep", "1000")
	lr.Env = append(os.Environ(), "GODEBUG=inittrace=1")
	lr.Stdout, lr.Stderr = w, w
	lr.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := lr.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	done := make(chan error, 1)
	go func() { done <- lr.Wait() }()

	// Read the trace a few bytes at a time, up to earlysig's line.
	var before bytes.Buffer
	seen := make(chan error, 1)
	br := bufio.NewReaderSize(r, 16)
	go func() {
		for {
			line, err := br.ReadString('\n')
			before.WriteString(line)
			if err != nil {
				seen <- err
				return
			}
			if strings.HasPrefix(line, "init "+earlyPackage+" ") {
				seen <- nil
				return
			}
		}
	}()
	select {
	case err := <-seen:
		if err != nil {
			t.Fatalf("the init trace ended (%v) without %s's line:\n%s", err, earlyPackage, before.String())
		}
	case <-time.After(waitLimit):
		lr.Process.Kill()
		r.Close() // ends the reading goroutine, whoever else holds the pipe
		<-seen
		t.Fatalf("no init trace line for %s after %v:\n%s", earlyPackage, waitLimit, before.String())
	}
	if err := lr.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	var after bytes.Buffer
	copied := make(chan struct{})
	go func() { io.Copy(&after, br); close(copied) }()
	var werr error
	select {
	case werr = <-done:
	case <-time.After(waitLimit):
		lr.Process.Kill()
		<-done
		t.Fatalf("leaderrun did not exit within %v of SIGTERM", waitLimit)
	}
	<-copied
	log := after.String()
	if i := strings.Index(log, "\ntime="); i >= 0 {
		log = log[i+1:] // leaderrun's own log, after the init trace
	}
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			t.Fatalf("leaderrun died of %v while starting; want it kept until main. Its log:\n%s", ws.Signal(), log)
		}
	}
	if werr != nil {
		t.Fatalf("leaderrun stopped while starting: %v, want exit status 0. Its log:\n%s", werr, log)
	}
	for _, want := range []string{`msg="received stop signal"`, `msg="stopped while standing by"`} {
		if !strings.Contains(log, want) {
			t.Errorf("leaderrun's log has no %s:\n%s", want, log)
		}
	}
}
