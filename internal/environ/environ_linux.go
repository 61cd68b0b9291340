package environ

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

func scrub(keys []string) error {
	for _, k := range keys {
		os.Unsetenv(k)
	}
	start, end, err := envBlock()
	if err != nil {
		return err
	}
	mem, err := openOwnMem()
	if err != nil {
		return fmt.Errorf("scrub the environment: %w", err)
	}
	defer mem.Close()
	block := make([]byte, end-start)
	if _, err := mem.ReadAt(block, int64(start)); err != nil {
		return fmt.Errorf("scrub the environment: read: %w", err)
	}
	off := 0
	for _, kv := range bytes.Split(block, []byte{0}) {
		key, _, ok := bytes.Cut(kv, []byte("="))
		if ok && contains(keys, string(key)) {
			from := off + len(key) + 1
			zero := make([]byte, len(kv)-len(key)-1)
			if _, err := mem.WriteAt(zero, int64(start)+int64(from)); err != nil {
				return fmt.Errorf("scrub the environment: write: %w", err)
			}
		}
		off += len(kv) + 1
	}
	return nil
}

// envBlock returns where the kernel's copy of the initial environment lies
// in this process's memory: fields 50 and 51 of /proc/self/stat.
func envBlock() (start, end uint64, err error) {
	data, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, 0, fmt.Errorf("scrub the environment: %w", err)
	}
	s := string(data)
	// Fields after the command name, which may hold spaces and ')'.
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	// f[0] is field 3 (state); env_start and env_end are fields 50, 51.
	if len(f) < 49 {
		return 0, 0, fmt.Errorf("scrub the environment: /proc/self/stat has %d fields", len(f)+2)
	}
	if start, err = strconv.ParseUint(f[47], 10, 64); err == nil {
		end, err = strconv.ParseUint(f[48], 10, 64)
	}
	if err != nil || end < start {
		return 0, 0, fmt.Errorf("scrub the environment: bad env_start/env_end in /proc/self/stat")
	}
	return start, end, nil
}

func contains(keys []string, k string) bool {
	for _, key := range keys {
		if key == k {
			return true
		}
	}
	return false
}

// openOwnMem opens /proc/self/mem for writing. Once Hide ran, the file
// belongs to root, so this process is made dumpable for the open alone
// (the descriptor stays usable after).
func openOwnMem() (*os.File, error) {
	if d, err := unix.PrctlRetInt(unix.PR_GET_DUMPABLE, 0, 0, 0, 0); err == nil && d == 0 {
		unix.Prctl(unix.PR_SET_DUMPABLE, 1, 0, 0, 0)
		defer unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
	}
	return os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
}

func hide() error {
	return unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0)
}
