package cmd

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"
)

// storeDSN is the first line of --store-file when given, else --store;
// giving both is an error. It warns, on stderr, when the file is readable
// by others.
func storeDSN(c *cli.Context) (string, error) {
	file := option(c, "store-file")
	if file == "" {
		return option(c, "store"), nil
	}
	if option(c, "store") != "" {
		return "", usagef("--store and --store-file (or LEADERRUN_STORE and LEADERRUN_STORE_FILE) given together: give one")
	}
	dsn, warning, err := readStoreFile(file)
	if err != nil {
		return "", usagef("--store-file %s: %w", file, err)
	}
	if warning != "" {
		warnLine(c.App.ErrWriter, fmt.Sprintf("--store-file %s: %s", file, warning))
	}
	return dsn, nil
}

// maxStoreFileLine bounds what readStoreFile reads of the file.
const maxStoreFileLine = 64 << 10

// readStoreFile reads the DSN from the first line of a regular file, without
// ever blocking (a FIFO without a writer), reading more than
// maxStoreFileLine (/dev/zero) or taking a terminal as this process's
// controlling terminal (O_NOCTTY): a UTF-8 byte order mark and surrounding
// spaces are dropped, and a blank first line is an error. warning is set
// when others may read the file, as libpq warns of a .pgpass.
func readStoreFile(path string) (dsn, warning string, err error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return "", "", &fs.PathError{Op: "open", Path: path, Err: err}
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "", "", err
	}
	if !st.Mode().IsRegular() {
		return "", "", errors.New("not a regular file")
	}
	data, err := io.ReadAll(io.LimitReader(f, maxStoreFileLine))
	if err != nil {
		return "", "", err
	}
	line, _, found := strings.Cut(string(data), "\n")
	if !found && len(data) == maxStoreFileLine {
		return "", "", fmt.Errorf("no line break in its first %d bytes", maxStoreFileLine)
	}
	line = strings.TrimSpace(strings.TrimPrefix(line, "\uFEFF"))
	if line == "" {
		return "", "", errors.New("the first line is empty: it must hold the store's DSN")
	}
	if st.Mode().Perm()&0o044 != 0 {
		warning = fmt.Sprintf("readable by users other than its owner (mode %04o); chmod 600 it", st.Mode().Perm())
	}
	return line, warning, nil
}
