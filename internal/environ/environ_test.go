package environ

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// The test binary runs itself with a secret in its environment; the child
// scrubs it and reports what /proc/self/environ then shows.
func TestMain(m *testing.M) {
	if mode := os.Getenv("ENVIRON_TEST_CHILD"); mode != "" {
		if mode == "hidden" {
			Hide()
		}
		if err := Scrub("ENVIRON_TEST_SECRET"); err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(2)
		}
		data, err := os.ReadFile("/proc/self/environ")
		if err != nil { // hidden, without privilege
			data, _ = os.ReadFile("/proc/" + strconv.Itoa(os.Getpid()) + "/cmdline")
		}
		os.Stdout.Write(data)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestScrubBlanksProcEnviron(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "ENVIRON_TEST_CHILD=1", "ENVIRON_TEST_SECRET=hunter2-secret", "ENVIRON_TEST_AFTER=kept")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v", err)
	}
	if bytes.Contains(out, []byte("hunter2")) {
		t.Errorf("/proc/self/environ still shows the secret after Scrub")
	}
	if !bytes.Contains(out, []byte("ENVIRON_TEST_SECRET=")) || !strings.Contains(string(out), "ENVIRON_TEST_AFTER=kept") {
		t.Errorf("Scrub damaged the rest of the block: %q", out)
	}
}

// TestScrubAfterHideWithoutPrivilege scrubs in a process that is already
// non-dumpable and not root, as leaderrun run by a user is: its
// /proc/self/mem then belongs to root, and Scrub used to fail with
// "permission denied" (and leaderrun warned that it could not).
func TestScrubAfterHideWithoutPrivilege(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to start the test as another user")
	}
	// The build directory is root's alone: run a copy the user can reach.
	dir := t.TempDir()
	bin := filepath.Join(dir, "environ.test")
	data, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(bin, "-test.run=^$")
	cmd.Env = append(os.Environ(), "ENVIRON_TEST_CHILD=hidden", "ENVIRON_TEST_SECRET=hunter2-secret")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("Scrub after Hide as uid 65534: %v: %s", err, stderr.String())
	}
}
