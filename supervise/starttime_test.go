package supervise

import (
	"path/filepath"
	"syscall"
	"testing"

	"github.com/leaderrun/leaderrun/internal/procstat"
)

func TestStartTimeNamesTheChild(t *testing.T) {
	ready := filepath.Join(t.TempDir(), "ready")
	c := startHelper(t, Spec{}, "sleep", ready)
	waitFile(t, ready)
	st, err := procstat.Read(c.Pid())
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.StartTime(), st.Start; got != want || got == 0 {
		t.Errorf("StartTime() = %d, want %d from /proc", got, want)
	}
	if got, want := st.Pgid, c.Pid(); got != want {
		t.Errorf("the child's process group = %d, want its pid %d", got, want)
	}
	c.Signal(syscall.SIGKILL)
	waitDone(t, c)
}
