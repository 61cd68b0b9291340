package postgres

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// TestDocumentedGrantsAreGrantSQL: the privileges docs/stores/postgres.md and the
// package documentation tell an administrator to grant are GrantSQL's,
// which TestRolePrivileges proves sufficient. (They once listed SELECT,
// INSERT and UPDATE on leases and candidates only: every Acquire prunes
// candidates, which takes DELETE, and a group needs its two tables.)
func TestDocumentedGrantsAreGrantSQL(t *testing.T) {
	want := grantLines(strings.Split(GrantSQL("leaderrun", "app"), "\n"), "")
	if len(want) == 0 {
		t.Fatal("GrantSQL returned no GRANT")
	}
	for _, doc := range []struct{ file, prefix string }{
		{"../../docs/stores/postgres.md", "    "},
		{"doc.go", "//\t"},
	} {
		data, err := os.ReadFile(doc.file)
		if err != nil {
			t.Fatal(err)
		}
		got := grantLines(strings.Split(string(data), "\n"), doc.prefix)
		if !slices.Equal(got, want) {
			t.Errorf("%s grants\n\t%s\nwant GrantSQL's\n\t%s", doc.file,
				strings.Join(got, "\n\t"), strings.Join(want, "\n\t"))
		}
	}
}

// grantLines returns the lines that begin with prefix and then a GRANT to
// the role app of anything but fence, without the prefix and identifier
// quotes, sorted.
func grantLines(lines []string, prefix string) []string {
	var out []string
	for _, l := range lines {
		l, ok := strings.CutPrefix(l, prefix)
		l = strings.ReplaceAll(strings.TrimSpace(l), `"`, "")
		if ok && strings.HasPrefix(l, "GRANT ") && strings.HasSuffix(l, " TO app;") && !strings.Contains(l, "fence") {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}
