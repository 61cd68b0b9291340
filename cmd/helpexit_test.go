package cmd

import (
	"io"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/leaderrun/leaderrun/internal/testenv/pgtest"
)

// TestOperatorCommandsExitAsTheirHelpSays: each operator command, given a
// store that refuses leaderrun (a role the server does not know) or one
// that cannot be reached, exits with the status its help gives for that.
// status's help said 1 for a refused store, where it exits 125, as
// leaderrun itself does.
func TestOperatorCommandsExitAsTheirHelpSays(t *testing.T) {
	base := pgtest.Require(t)
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.User("leaderrun_no_such_role")
	refused := u.String()
	u.User, u.Host = url.User("postgres"), "127.0.0.1:1" // nothing listens there
	unreachable := u.String()

	commands := newApp(nil, nil, io.Discard, io.Discard).Commands
	for _, name := range []string{"status", "watch", "step-down", "forget"} {
		t.Run(name, func(t *testing.T) {
			var help string
			for _, c := range commands {
				if c.Name == name {
					help = strings.Join(strings.Fields(c.Description), " ")
				}
			}
			for _, tc := range []struct {
				store string
				said  *regexp.Regexp // the help's clause on this case; its first group is the status
			}{
				{refused, regexp.MustCompile(`(\d+)[^;]*?refused`)},
				{unreachable, regexp.MustCompile(`(\d+)[^;]*?(unreachable|could not be reached)`)},
			} {
				m := tc.said.FindStringSubmatch(help)
				if m == nil {
					t.Errorf("%s --help does not say its exit status for %q:\n%s", name, tc.said, help)
					continue
				}
				want, _ := strconv.Atoi(m[1])
				sigs := make(chan os.Signal)
				if got := Main(sigs, []string{"leaderrun", name, "--store", tc.store, "relay"}, io.Discard, io.Discard); got != want {
					t.Errorf("leaderrun %s --store %s = exit %d, its help says %d (%q)", name, tc.store, got, want, m[0])
				}
			}
		})
	}
}
