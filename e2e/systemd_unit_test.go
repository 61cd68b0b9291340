package e2e

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestSystemdUnitStartsClean runs the shipped unit's ExecStart= as systemd
// would, with the shipped example.env loaded as its EnvironmentFile=, and
// requires that leaderrun starts without a warning: the unit's own
// variables (LEADERRUN_COMMAND) are not "unknown options". The example's
// command does not exist here, so leaderrun stops at it, which shows that
// the command line reached it as the unit expands it.
func TestSystemdUnitStartsClean(t *testing.T) {
	unit := readUnit(t, "../packaging/systemd/leaderrun@.service")
	env := readEnvironmentFile(t, "../packaging/systemd/example.env")
	argv := expandExecStart(t, unit["ExecStart"], "relay", env)
	if got, want := argv[0], "/usr/bin/leaderrun"; got != want {
		t.Fatalf("ExecStart= runs %s, want %s", got, want)
	}
	c := exec.Command("leaderrun", argv[1:]...)
	c.Dir = t.TempDir()
	c.Env = []string{"PATH=" + os.Getenv("PATH"), "LEADERRUN_STORE=sqlite:" + filepath.Join(c.Dir, "leases.db")}
	for k, v := range env {
		c.Env = append(c.Env, k+"="+v)
	}
	out, _ := c.CombinedOutput()
	if bytes.Contains(out, []byte("warning")) || bytes.Contains(out, []byte("level=WARN")) {
		t.Errorf("leaderrun warned when started as the unit starts it (%q):\n%s", argv, out)
	}
	if !bytes.Contains(out, []byte(`"/usr/local/bin/relay": command not found`)) {
		t.Errorf("leaderrun did not get example.env's command from ExecStart= (%q):\n%s", argv, out)
	}
}

// readUnit returns the Key=value lines of a unit file (the last of each key).
func readUnit(t *testing.T, path string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	keys := map[string]string{}
	for line := range strings.Lines(string(data)) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		if k, v, ok := strings.Cut(line, "="); ok {
			keys[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return keys
}

// readEnvironmentFile reads VAR=value lines as systemd's EnvironmentFile=
// does for the forms example.env uses: comments, blank lines, and values
// with or without quotes around them.
func readEnvironmentFile(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			t.Fatalf("%s: not VAR=value: %q", path, line)
		}
		if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
			v = v[1 : len(v)-1]
		}
		env[strings.TrimSpace(k)] = v
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return env
}

// expandExecStart splits an ExecStart= command line as systemd does for
// the forms the unit uses: %i is the instance, a word $VAR becomes VAR's
// value split at whitespace, ${VAR} stays one word.
func expandExecStart(t *testing.T, line, instance string, env map[string]string) []string {
	t.Helper()
	var argv []string
	for _, w := range strings.Fields(strings.ReplaceAll(line, "%i", instance)) {
		switch {
		case strings.HasPrefix(w, "${") && strings.HasSuffix(w, "}"):
			argv = append(argv, env[w[2:len(w)-1]])
		case strings.HasPrefix(w, "$"):
			argv = append(argv, strings.Fields(env[w[1:]])...)
		default:
			argv = append(argv, w)
		}
	}
	if len(argv) == 0 {
		t.Fatalf("ExecStart=%q is empty", line)
	}
	return argv
}
