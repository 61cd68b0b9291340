package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParseStraceTrace(t *testing.T) {
	trace := `17349 fcntl(9, F_SETLK, {l_type=F_WRLCK, l_whence=SEEK_SET, l_start=124, l_len=1}) = 0
17349 fcntl(9, F_SETLK, {l_type=F_UNLCK, l_whence=SEEK_SET, l_start=124, l_len=1}) = 0
17349 fcntl(9, F_SETLK, {l_type=F_RDLCK, l_whence=SEEK_SET, l_start=124, l_len=1}) = 0
17349 fcntl(9, F_SETLK, {l_type=F_WRLCK, l_whence=SEEK_SET, l_start=120, l_len=1}) = 0
17349 pwrite64(8, "\0\0\0\2", 24, 53592) = 24
17349 fcntl(9, F_SETLK, {l_type=F_UNLCK, l_whence=SEEK_SET, l_start=120, l_len=1}) = 0
17349 fcntl(9, F_SETLK, {l_type=F_UNLCK, l_whence=SEEK_SET, l_start=124, l_len=1}) = 0
17350 fcntl(9, F_SETLK, {l_type=F_RDLCK, l_whence=SEEK_SET, l_start=125, l_len=1} <unfinished ...>
17349 fcntl(5, F_SETLK, {l_type=F_WRLCK, l_whence=SEEK_SET, l_start=1073741826, l_len=510}) = 0
17350 <... fcntl resumed>) = 0
17350 fcntl(9, F_SETLK, {l_type=F_WRLCK, l_whence=SEEK_SET, l_start=120, l_len=1}) = -1 EAGAIN (Resource temporarily unavailable)
17350 fcntl(9, F_SETLK, {l_type=F_UNLCK, l_whence=SEEK_SET, l_start=125, l_len=1}) = 0
17350 fcntl(9, F_SETLK, {l_type=F_RDLCK, l_whence=SEEK_SET, l_start=125, l_len=1}) = 0
17350 fcntl(9, F_SETLK, {l_type=F_WRLCK, l_whence=SEEK_SET, l_start=120, l_len=1} <unfinished ...>
17349 fcntl(9, F_SETLK, {l_type=F_RDLCK, l_whence=SEEK_SET, l_start=126, l_len=1}) = 0
17350 <... fcntl resumed>) = 0
17351 +++ exited with 0 +++
`
	path := filepath.Join(t.TempDir(), "trace")
	if err := os.WriteFile(path, []byte(trace), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := parseStraceTrace(path)
	if err != nil {
		t.Fatal(err)
	}
	// Transactions: thread 17349 wrote once and read once; 17350 wrote
	// once, after a busy attempt and its retry.
	if got.Writes != 2 || got.Busy != 1 || got.Reads() != 1 {
		t.Errorf("writes, busy, reads = %d, %d, %d; want 2, 1, 1", got.Writes, got.Busy, got.Reads())
	}
	if got, want := got.Calls["fcntl"], int64(13); got != want {
		t.Errorf("fcntl calls = %d, want %d", got, want)
	}
}

func TestPartLogStopOfReusedPid(t *testing.T) {
	l := &partLog{stops: map[int][]mark{}, cur: map[int]mark{}}
	first := mark{Pid: 7, At: 100, Partition: 1, Token: "5"}
	l.stops[7] = []mark{{Pid: 7, At: 150, Partition: 1, Token: "5"}}
	reused := mark{Pid: 7, At: 200, Partition: 2}
	if _, ok := l.stopOf(first); !ok {
		t.Error("the first child's stop was not found")
	}
	if _, ok := l.stopOf(reused); ok {
		t.Error("a reused pid's child was taken as stopped by its predecessor's stop mark")
	}
}

// A child killed without a stop mark (SIGKILL) whose pid a child of another
// partition reuses has not stopped when that child does: taking the later
// mark as its stop counted an overlap that never was.
func TestPartLogStopOfKilledChildWhosePidIsReused(t *testing.T) {
	l := &partLog{stops: map[int][]mark{}, cur: map[int]mark{}}
	killed := mark{Pid: 7, At: 100, Partition: 1, Token: "5"}
	l.stops[7] = []mark{{Pid: 7, At: 300, Partition: 2, Token: "9"}} // the reuser's stop
	if stop, ok := l.stopOf(killed); ok {
		t.Errorf("the killed child was taken as stopped by %+v, the stop of another partition's child", stop)
	}
}
