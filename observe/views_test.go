package observe

import (
	"strconv"
	"testing"
	"time"
)

func TestSecondsAreMilliseconds(t *testing.T) {
	for d, want := range map[time.Duration]string{
		13399 * time.Millisecond:                      "13.399",
		13399*time.Millisecond + 400*time.Microsecond: "13.399",
		100 * time.Millisecond:                        "0.1",
		0:                                             "0",
	} {
		if got := strconv.FormatFloat(seconds(d), 'f', -1, 64); got != want {
			t.Errorf("seconds(%v) = %s, want %s", d, got, want)
		}
	}
}
