package elect

import (
	"slices"
	"testing"
	"time"
)

// Log lines leave out a step-down's successor when it names none, instead
// of successor="", and a sub-millisecond duration does not read 0s.
func TestLogAttrs(t *testing.T) {
	if got := successorAttr(""); len(got) != 0 {
		t.Errorf("successorAttr(\"\") = %v, want nothing", got)
	}
	if got, want := successorAttr("web-2"), []any{"successor", "web-2"}; !slices.Equal(got, want) {
		t.Errorf("successorAttr(web-2) = %v, want %v", got, want)
	}
	for _, tc := range []struct{ in, want time.Duration }{
		{417 * time.Microsecond, 417 * time.Microsecond},
		{1234567 * time.Nanosecond, time.Millisecond},
		{0, 0},
	} {
		if got := roundLogged(tc.in); got != tc.want {
			t.Errorf("roundLogged(%v) = %v, want %v", tc.in, got, tc.want)
		}
	}
}
