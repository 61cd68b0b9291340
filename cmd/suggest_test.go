package cmd

import (
	"strings"
	"testing"
)

func TestNearest(t *testing.T) {
	commands := []string{"help", "status", "watch", "step-down", "version"}
	for _, tc := range []struct{ word, want string }{
		{"stauts", "status"},
		{"stats", "status"},
		{"wacth", "watch"},
		{"stepdown", "step-down"},
		{"hlep", "help"},
		{"sleep", ""},
		{"cat", ""},
		{"redis-server", ""},
	} {
		if got := nearest(tc.word, commands); got != tc.want {
			t.Errorf("nearest(%q) = %q, want %q", tc.word, got, tc.want)
		}
	}
}

func TestOptionsFirst(t *testing.T) {
	app := App()
	for _, tc := range []struct{ in, want string }{
		{"leaderrun status relay --json", "leaderrun status --json relay"},
		{"leaderrun --store x step-down relay --to b --wait", "leaderrun --store x step-down --to b --wait relay"},
		{"leaderrun --name relay ./run --json", "leaderrun --name relay ./run --json"},
	} {
		got := optionsFirst(strings.Fields(tc.in), app.Flags, app.Commands)
		if joined := strings.Join(got, " "); joined != tc.want {
			t.Errorf("optionsFirst(%s) = %s, want %s", tc.in, joined, tc.want)
		}
	}
}
