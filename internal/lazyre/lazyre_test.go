package lazyre

import "testing"

func TestCompiledOnFirstUse(t *testing.T) {
	bad := New("(") // would panic at once if compiled here
	defer func() {
		if recover() == nil {
			t.Error("MatchString of an invalid pattern did not panic")
		}
	}()
	re := New(`^a(b+)$`)
	if !re.MatchString("abb") || re.MatchString("ac") {
		t.Error("MatchString: want abb to match, ac not")
	}
	if got := re.ReplaceAllString("abb", "x$1"); got != "xbb" {
		t.Errorf("ReplaceAllString = %q, want xbb", got)
	}
	if got := re.FindAllStringSubmatch("abbb", -1); len(got) != 1 || got[0][1] != "bbb" {
		t.Errorf("FindAllStringSubmatch = %q, want [[abbb bbb]]", got)
	}
	bad.MatchString("x")
}
