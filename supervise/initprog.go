package supervise

import (
	"io"
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// A PID namespace's init is the leaderrun-init program (package nsinit,
// ./internal/nsinit/leaderrun-init) when `make build` embedded it for this
// architecture (initprog_$GOARCH.go, from initprog/$GOARCH/leaderrun-init,
// which git ignores): about a tenth of leaderrun's size, it starts faster
// and its private memory is what a minimal Go program's is. It runs from a
// sealed memfd, made once and shared by every init this process starts, so
// that its pages are shared too. Without it (`go build`, `go test`, or a
// kernel that refuses to execute a memfd) the init is this program again.

// initProgram opens the embedded leaderrun-init; nil, or an error, when
// there is none.
var initProgram func() (io.ReadCloser, error)

// initFD is the sealed memfd holding initProgram, made on first use.
var initFD struct {
	mu   sync.Mutex
	made bool
	fd   int // -1 if there is none
}

// initExecutable returns the program to start as a namespace's init, and
// its argv[0]: this program's, whichever program the init is, so that ps
// and pgrep show it as before.
func initExecutable() (path, argv0 string, err error) {
	if fd := initMemfd(); fd >= 0 {
		// The child opens it before exec closes it (close-on-exec):
		// through /proc, which ForkExec needs, it is the child's own.
		return "/proc/self/fd/" + strconv.Itoa(fd), os.Args[0], nil
	}
	self, err := os.Executable()
	return self, os.Args[0], err
}

func initMemfd() int {
	initFD.mu.Lock()
	defer initFD.mu.Unlock()
	if !initFD.made {
		initFD.made, initFD.fd = true, sealedMemfd(initProgram)
	}
	return initFD.fd
}

// memfdMinFD is the lowest descriptor the memfd may have: ForkExec moves
// the child's files to descriptors from 0 up to about twice their number
// before it execs, and must not overwrite it.
const memfdMinFD = 32

// sealedMemfd returns a close-on-exec memfd holding what open reads,
// sealed against any change, or -1 when there is nothing to open or the
// kernel refuses. It copies in small pieces: the program never becomes heap.
func sealedMemfd(open func() (io.ReadCloser, error)) int {
	if open == nil {
		return -1
	}
	prog, err := open()
	if err != nil {
		return -1
	}
	defer prog.Close()
	const flags = unix.MFD_CLOEXEC | unix.MFD_ALLOW_SEALING
	fd, err := unix.MemfdCreate("leaderrun-init", flags|unix.MFD_EXEC)
	if err == unix.EINVAL { // a kernel before 6.3, where every memfd may be executed
		fd, err = unix.MemfdCreate("leaderrun-init", flags)
	}
	if err != nil {
		return -1
	}
	defer unix.Close(fd)
	n, err := io.Copy(fdWriter(fd), prog)
	if err != nil || n == 0 {
		return -1
	}
	seals := unix.F_SEAL_SEAL | unix.F_SEAL_SHRINK | unix.F_SEAL_GROW | unix.F_SEAL_WRITE
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals); err != nil {
		return -1
	}
	high, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, memfdMinFD)
	if err != nil {
		return -1
	}
	return high
}

// fdWriter writes to a descriptor that its owner closes.
type fdWriter int

func (w fdWriter) Write(b []byte) (int, error) {
	n, err := unix.Write(int(w), b)
	if n < 0 {
		n = 0
	}
	return n, err
}
