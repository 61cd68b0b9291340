package procstat

import (
	"os"
	"testing"
)

func TestParse(t *testing.T) {
	line := "4242 (a) b (c)) S 1 4242 4000 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 987654 1000 200 18446744073709551615\n"
	st, err := Parse([]byte(line))
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if got, want := st, (Stat{Pid: 4242, Comm: "a) b (c)", State: 'S', PPid: 1, Pgid: 4242, Sid: 4000, Start: 987654}); got != want {
		t.Errorf("Parse = %+v, want %+v", got, want)
	}
	for _, bad := range []string{"", "1 (x", "1 x) S 1 1 1", "x (y) S 1 2 3 0 -1 0 0 0 0 0 0 0 0 0 0 0 1 0 5 0 0",
		"1 (y) S 1 2 3 0 -1 0 0 0 0 0 0 0 0 0 0 0 1 0 -5 0 0", "1 (y) SS 1 2 3 0 -1 0 0 0 0 0 0 0 0 0 0 0 1 0 5"} {
		if _, err := Parse([]byte(bad)); err == nil {
			t.Errorf("Parse(%q) succeeded, want an error", bad)
		}
	}
}

func TestReadSelf(t *testing.T) {
	st, err := Read(os.Getpid())
	if err != nil {
		t.Fatalf("Read(self): %v", err)
	}
	if st.Pid != os.Getpid() || st.PPid != os.Getppid() || st.Start == 0 {
		t.Errorf("Read(self) = %+v, want pid %d, ppid %d and a start time", st, os.Getpid(), os.Getppid())
	}
}
