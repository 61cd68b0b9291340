package cmd

import (
	"bufio"
	"bytes"
	"errors"
	"net"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// hostile is what a server that wants to move an operator's terminal
// answers: a window title, a screen clear, a forged line.
const hostile = "\x1b]0;owned\x07\x1b[2J\nleaderrun: forged line\u0085"

// hostileRedis answers every command line with an error whose text is
// hostile, until the test ends.
func hostileRedis(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if strings.HasPrefix(line, "*") || strings.HasPrefix(line, "PING") {
						c.Write([]byte("-ERR " + strings.ReplaceAll(hostile, "\n", " ") + "\r\n"))
					}
				}
			})
		}
	})
	return ln.Addr().String()
}

// controls returns the control characters in out other than the newlines
// that end its lines.
func controls(out string) string {
	var found []string
	for _, line := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		for _, r := range line {
			if r != ' ' && (r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0)) {
				found = append(found, string(r))
			}
		}
	}
	return strings.Join(found, "")
}

func TestPrintable(t *testing.T) {
	for in, want := range map[string]string{
		`lease "x": refused`:     `lease "x": refused`,
		"ERR \x1b[2J":            `ERR \x1b[2J`,
		"two\nlines\r":           `two\nlines\r`,
		"tab\there":              `tab\there`,
		"next line\u0085":        `next line\u0085`,
		"ünïcödé stays readable": "ünïcödé stays readable",
	} {
		if got := printable(in); got != want {
			t.Errorf("printable(%q) = %q, want %q", in, got, want)
		}
	}
}

// The error line that ends a client command quotes what a server said.
func TestStoreErrorTextIsEscaped(t *testing.T) {
	addr := hostileRedis(t)
	var stdout, stderr bytes.Buffer
	code := Main(nil, []string{"leaderrun", "status", "--store", "redis://" + addr + "/0?dial_timeout=5s"}, &stdout, &stderr)
	if code == 0 {
		t.Fatalf("status against a server that refuses everything exited 0; stderr:\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), `\x1b]0;owned`) {
		t.Fatalf("the server's error is not in the error line, escaped:\n%q", stderr.String())
	}
	if c := controls(stdout.String() + stderr.String()); c != "" {
		t.Errorf("control characters %q reached the terminal:\n%q", c, stderr.String())
	}
}

// watch and step-down --wait report a failed read and go on (or, when the
// store cannot be opened, end): those lines quote the server's text too.
func TestRetryLineIsEscaped(t *testing.T) {
	var b bytes.Buffer
	retryLine(&b, `watch "x"`, errors.New("read: "+hostile), time.Second)
	if c := controls(b.String()); c != "" {
		t.Errorf("control characters %q in %q", c, b.String())
	}
	if strings.Count(b.String(), "\n") != 1 {
		t.Errorf("the retry line is not one line: %q", b.String())
	}

	addr := hostileRedis(t)
	sigs := make(chan os.Signal, 1)
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan int, 1)
	go func() {
		defer pw.Close()
		done <- Main(sigs, []string{"leaderrun", "watch", "--store", "redis://" + addr + "/0?dial_timeout=5s", "x"}, os.Stdout, pw)
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	sigs <- syscall.SIGTERM
	if err != nil {
		t.Fatalf("watch wrote no line: %v", err)
	}
	if !strings.Contains(line, `\x1b]0;owned`) {
		t.Fatalf("want watch's line with the server's text escaped, got %q", line)
	}
	if c := controls(line); c != "" {
		t.Errorf("control characters %q in watch's line %q", c, line)
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("watch did not end on SIGTERM")
	}
}
