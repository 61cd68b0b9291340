package sqlite

import (
	"strings"
	"testing"
)

// TestOtherOwnerSaysWhose: a store in another user's directory, opened by
// a command that only reads it, says whose it is and how to run as that
// user, not only "permission denied" (issue 37.13).
func TestOtherOwnerSaysWhose(t *testing.T) {
	if got, want := otherOwner(0), "the store belongs to root: run leaderrun as root, e.g. with sudo;"; !strings.Contains(got, want) {
		t.Errorf("otherOwner(0) = %q, want it to contain %q", got, want)
	}
	if got, want := otherOwner(4000123), "belongs to uid 4000123"; !strings.Contains(got, want) {
		t.Errorf("otherOwner(4000123) = %q, want it to contain %q", got, want)
	}
}
