// Package citest decides what a test does when something it needs is
// missing: outside CI it skips with a message, in CI (the environment
// variable CI set) it fails, because CI must not pass by skipping.
package citest

import (
	"fmt"
	"net"
	"os"
	"testing"
)

// FreePort returns a loopback TCP port that was free a moment ago, for a
// server a test starts.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// InCI reports whether the tests run in CI.
func InCI() bool { return os.Getenv("CI") != "" }

// Missing skips tb with the message, or fails it in CI.
func Missing(tb testing.TB, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if InCI() {
		tb.Fatal(msg + " (CI must run this test, not skip it)")
	}
	tb.Skip(msg)
}
