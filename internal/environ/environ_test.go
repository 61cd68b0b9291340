package environ

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// The test binary runs itself with a secret in its environment; the child
// scrubs it and reports what /proc/self/environ then shows.
func TestMain(m *testing.M) {
	if os.Getenv("ENVIRON_TEST_CHILD") != "" {
		if err := Scrub("ENVIRON_TEST_SECRET"); err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(2)
		}
		data, _ := os.ReadFile("/proc/self/environ")
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
