package cmd

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// storeFileTTYEnv names, in TestStoreFileTakesNoTerminal's child, the
// terminal it passes to readStoreFile.
const storeFileTTYEnv = "LEADERRUN_TEST_STORE_FILE_TTY"

// TestStoreFileTakesNoTerminal: a leaderrun without a controlling
// terminal (a service, a session of its own) given a terminal as
// --store-file refuses it and does not make it its controlling terminal
// (which would send it the terminal's ^C and hang-up). The child, a
// session leader without a terminal, reads the file and reports its
// tty_nr (field 7 of /proc/self/stat), which must stay 0.
func TestStoreFileTakesNoTerminal(t *testing.T) {
	if p := os.Getenv(storeFileTTYEnv); p != "" {
		_, _, err := readStoreFile(p)
		stat, _ := os.ReadFile("/proc/self/stat")
		f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:])) // from field 3, state
		fmt.Printf("tty_nr=%s err=%v\n", f[4], err)
		os.Exit(0)
	}
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals here: %v", err)
	}
	defer master.Close()
	n, err := unlockPty(master)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	c := exec.Command(os.Args[0], "-test.run=^TestStoreFileTakesNoTerminal$")
	c.Env = append(os.Environ(), fmt.Sprintf("%s=/dev/pts/%d", storeFileTTYEnv, n))
	c.Stdout = &out
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // no controlling terminal
	if err := c.Run(); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if got := out.String(); !strings.HasPrefix(got, "tty_nr=0 ") || !strings.Contains(got, "not a regular file") {
		t.Errorf("the child reports %q; want tty_nr=0 and the error that a terminal is not a regular file", got)
	}
}

// unlockPty unlocks the pseudo-terminal master and returns its number.
func unlockPty(master *os.File) (int, error) {
	rc, err := master.SyscallConn()
	if err != nil {
		return 0, err
	}
	var n int
	var ierr error
	if err := rc.Control(func(fd uintptr) {
		if ierr = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); ierr == nil {
			n, ierr = unix.IoctlGetInt(int(fd), unix.TIOCGPTN)
		}
	}); err != nil {
		return 0, err
	}
	return n, ierr
}
