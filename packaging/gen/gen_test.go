package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func leaderrun(t *testing.T) program {
	t.Helper()
	p, err := programOf(app())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The definition reached through cmd is leaderrun's, with what the
// packaging documents.
func TestProgram(t *testing.T) {
	p := leaderrun(t)
	if got, want := p.Name, "leaderrun"; got != want {
		t.Errorf("Name = %q, want %q", got, want)
	}
	var flags, commands []string
	for _, f := range p.Flags {
		flags = append(flags, f.Name)
	}
	for _, c := range p.Commands {
		commands = append(commands, c.Name)
	}
	for _, want := range []string{"name", "store", "store-file", "kill-grace", "once"} {
		if !slices.Contains(flags, want) {
			t.Errorf("flags %v lack %q", flags, want)
		}
	}
	for _, want := range []string{"status", "watch", "version"} {
		if !slices.Contains(commands, want) {
			t.Errorf("commands %v lack %q", commands, want)
		}
	}
}

// Every hint is about a flag that exists: a renamed flag must not silently
// lose its completion.
func TestHintsNameFlags(t *testing.T) {
	p := leaderrun(t)
	for name := range hints {
		if !slices.ContainsFunc(p.valueFlags(), func(f option) bool { return f.Name == name }) {
			t.Errorf("hint for --%s, which is not a flag that takes a value", name)
		}
	}
	if got := signalNames(); !slices.Contains(got, "TERM") || !slices.Contains(got, "USR1") {
		t.Errorf("signalNames() = %v, want TERM and USR1 among them", got)
	}
}

func generated(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := generate(dir, "v9.9.9"); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestScripts(t *testing.T) {
	p := leaderrun(t)
	dir := generated(t)
	for _, s := range []struct{ shell, file string }{
		{"bash", "leaderrun.bash"},
		{"zsh", "_leaderrun"},
		{"fish", "leaderrun.fish"},
	} {
		path := filepath.Join(dir, "completions", s.file)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range p.Flags {
			if !bytes.Contains(data, []byte(f.Name)) {
				t.Errorf("%s completion lacks --%s", s.shell, f.Name)
			}
		}
		for _, c := range p.Commands {
			if !bytes.Contains(data, []byte(c.Name)) {
				t.Errorf("%s completion lacks %s", s.shell, c.Name)
			}
		}
		if _, err := exec.LookPath(s.shell); err != nil {
			t.Logf("%s not installed: syntax not checked", s.shell)
			continue
		}
		if out, err := exec.Command(s.shell, "-n", path).CombinedOutput(); err != nil {
			t.Errorf("%s -n %s: %v\n%s", s.shell, s.file, err, out)
		}
	}
}

// The bash script completes what a user at the prompt expects.
func TestBashCompletion(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash not installed")
	}
	script := filepath.Join(generated(t), "completions", "leaderrun.bash")
	var commands []string
	for _, c := range leaderrun(t).Commands {
		commands = append(commands, c.Name)
	}
	slices.Sort(commands)
	prog := filepath.Join(t.TempDir(), "lrprog")
	if err := os.WriteFile(prog, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		words []string // the last one is being completed
		want  string
	}{
		{[]string{"leaderrun", ""}, strings.Join(commands, " ")},
		{[]string{"leaderrun", "--log-l"}, "--log-level"},
		{[]string{"leaderrun", "--log-level", "w"}, "warn"},
		{[]string{"leaderrun", "--log-format", "=", ""}, "json text"},
		{[]string{"leaderrun", "--stop-signal", "US"}, "USR1 USR2"},
		{[]string{"leaderrun", "--name", "x", "--on"}, "--once"},
		{[]string{"leaderrun", "--name", "status", "--js"}, ""}, // status is --name's value
		{[]string{"leaderrun", "status", "--js"}, "--json"},
		{[]string{"leaderrun", "watch", "--name", "x", "--st"}, "--store --store-file"},
		{[]string{"leaderrun", "--name", "x", "--", "--js"}, ""},               // the command's words
		{[]string{"leaderrun", "--name", "x", "--", "version", "--"}, ""},      // not leaderrun's version
		{[]string{"leaderrun", "--name", "x", "--", prog[:len(prog)-2]}, prog}, // a command
	} {
		words := ""
		for _, w := range tc.words {
			words += " " + shellQuote(w)
		}
		cmd := exec.Command("bash", "--norc", "--noprofile", "-c", `
source "$1"
COMP_WORDS=(`+words+`)
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
_leaderrun
printf '%s\n' "${COMPREPLY[@]}" | sort -u | xargs`, "bash", script)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("%q: %v\n%s", tc.words, err, out)
			continue
		}
		if got := strings.TrimSpace(string(out)); got != tc.want {
			t.Errorf("completing %q = %q, want %q", tc.words, got, tc.want)
		}
	}
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func TestManPage(t *testing.T) {
	p := leaderrun(t)
	path := filepath.Join(generated(t), "leaderrun.1.gz")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	src, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(src, []byte(`"leaderrun v9.9.9"`)) {
		t.Errorf("man page does not name version v9.9.9:\n%.300s", src)
	}
	for _, fl := range p.Flags {
		if !bytes.Contains(src, []byte(`\-\-`+roff(fl.Name))) {
			t.Errorf("man page lacks --%s", fl.Name)
		}
	}
	if _, err := exec.LookPath("man"); err != nil {
		t.Skip("man not installed: rendering not checked")
	}
	cmd := exec.Command("man", "--warnings=w", "-l", path)
	cmd.Env = append(os.Environ(), "MANWIDTH=80", "MANPAGER=cat", "PAGER=cat")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("man -l: %v\n%s", err, stderr.Bytes())
	}
	if stderr.Len() > 0 {
		t.Errorf("man -l warns:\n%s", stderr.Bytes())
	}
	// The description, exit statuses and examples of --help (issue 37.7).
	for _, want := range []string{"SYNOPSIS", "leaderrun [options] -- COMMAND", "LEADERRUN_KILL_GRACE",
		"DESCRIPTION\n       Every replica runs the same line", "EXIT STATUS\n       The exit status is the command's",
		"124 not acquired within --acquire-timeout", "EXAMPLES\n       leaderrun --name relay -- ./relay --port 7000"} {
		if !bytes.Contains(out, []byte(want)) {
			t.Errorf("rendered man page lacks %q", want)
		}
	}
}

// The same definition gives the same bytes: packages are reproducible.
func TestReproducible(t *testing.T) {
	a, b := generated(t), generated(t)
	for _, name := range []string{"leaderrun.1.gz", "completions/leaderrun.bash", "completions/_leaderrun", "completions/leaderrun.fish"} {
		x, err := os.ReadFile(filepath.Join(a, name))
		if err != nil {
			t.Fatal(err)
		}
		y, err := os.ReadFile(filepath.Join(b, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(x, y) {
			t.Errorf("%s differs between two runs", name)
		}
	}
}

// TestREADMEOptionsTable: the README's table of options is the one the CLI
// definition gives, so that it cannot drift from --help.
func TestREADMEOptionsTable(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	const begin, end = "<!-- options: generated by `go run ./packaging/gen -readme`; a test keeps them equal -->\n", "<!-- end of options -->"
	_, rest, ok := strings.Cut(string(readme), begin)
	table, _, ok2 := strings.Cut(rest, end)
	if !ok || !ok2 {
		t.Fatalf("README.md has no generated table of options between %q and %q", begin, end)
	}
	p, err := programOf(app())
	if err != nil {
		t.Fatal(err)
	}
	var want strings.Builder
	if err := writeOptionsTable(&want, p); err != nil {
		t.Fatal(err)
	}
	if table != want.String() {
		t.Errorf("README.md's table of options differs from the CLI's; run go run ./packaging/gen -readme and paste it:\n%s", want.String())
	}
}

// TestManualNamedAlike: --help, the man page and the systemd unit's
// Documentation= name the same manual: leaderrun(1) and docsURL.
func TestManualNamedAlike(t *testing.T) {
	unit, err := os.ReadFile("../systemd/leaderrun@.service")
	if err != nil {
		t.Fatal(err)
	}
	var docs []string
	for _, line := range strings.Split(string(unit), "\n") {
		if v, ok := strings.CutPrefix(line, "Documentation="); ok {
			docs = append(docs, strings.Fields(v)...)
		}
	}
	if want := []string{"man:leaderrun(1)", docsURL}; !slices.Equal(docs, want) {
		t.Errorf("the unit's Documentation= names %q, want %q", docs, want)
	}
	help := leaderrun(t).Description
	for _, want := range []string{"leaderrun(1)", "man leaderrun", docsURL} {
		if !strings.Contains(help, want) {
			t.Errorf("--help does not name %q", want)
		}
	}
	var man strings.Builder
	if err := writeMan(&man, leaderrun(t), "v9.9.9"); err != nil {
		t.Fatal(err)
	}
	_, seeAlso, _ := strings.Cut(man.String(), ".SH SEE ALSO\n")
	if !strings.Contains(seeAlso, docsURL) {
		t.Errorf("the man page's SEE ALSO does not name %s:\n%s", docsURL, seeAlso)
	}
	if strings.Contains(man.String(), "Manual:") {
		t.Errorf("the man page's description keeps --help's Manual: paragraph")
	}
}
