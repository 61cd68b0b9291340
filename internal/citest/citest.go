// Package citest decides what a test does when something it needs is
// missing: outside CI it skips with a message, in CI (the environment
// variable CI set) it fails, because CI must not pass by skipping.
package citest

import (
	"fmt"
	"os"
	"testing"
)

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
