package kubernetes

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
	"k8s.io/client-go/tools/clientcmd"
)

// A kubeconfig runs code: its exec plugin is a command that client-go
// starts with leaderrun's user and environment, and its token file and
// keys are read as that user. So leaderrun reads only a kubeconfig that
// nobody but its user and root could have written, as the SQLite store
// opens only a database in such a place (lease/sqlite's checkPrivate).

// maxLinks bounds the symbolic links followed in one path, as the
// kernel's ELOOP does.
const maxLinks = 40

// errKubeconfigMissing says that a kubeconfig does not exist.
var errKubeconfigMissing = errors.New("does not exist")

// checkKubeconfigs refuses the kubeconfig files that rules would read
// (?kubeconfig=, else every file $KUBECONFIG lists, else ~/.kube/config)
// unless checkKubeconfig accepts each, before anything in them is read.
// From a list it drops the files that do not exist, which client-go would
// skip, so that none made after the check is read. It turns off
// client-go's migration of an old ~/.kube/.kubeconfig, which would copy
// that file to ~/.kube/config as this user.
func checkKubeconfigs(rules *clientcmd.ClientConfigLoadingRules) error {
	rules.MigrationRules = nil
	if rules.ExplicitPath != "" {
		return checkKubeconfig(rules.ExplicitPath)
	}
	var kept []string
	for _, path := range rules.Precedence {
		err := checkKubeconfig(path)
		switch {
		case errors.Is(err, errKubeconfigMissing):
		case err != nil:
			return err
		default:
			kept = append(kept, path)
		}
	}
	rules.Precedence = kept
	return nil
}

// checkKubeconfig refuses the kubeconfig at path, naming it and why,
// unless the file and every directory and symbolic link on the way to it
// belong to this user or root, no one else may write the file, and no
// directory lets another user replace an entry in it: none is writable by
// every user, unless it is sticky (as /tmp is: there only an entry's owner
// may replace it, and each entry on the way is this user's or root's).
// Group-writable directories are accepted, as the SQLite store accepts
// its database's. A path that does not exist is errKubeconfigMissing.
func checkKubeconfig(path string) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	refuse := func(format string, args ...any) error {
		return fmt.Errorf("kubeconfig %s: %s: another user could make leaderrun run what it says (an exec plugin) as uid %d; use a kubeconfig only this user or root can write",
			path, fmt.Sprintf(format, args...), os.Geteuid())
	}
	euid := uint32(os.Geteuid())
	ours := func(st *unix.Stat_t) bool { return st.Uid == euid || st.Uid == 0 }
	dir, pending, links := "/", strings.Split(abs, "/"), 0
	var st unix.Stat_t
	if err := unix.Stat(dir, &st); err != nil {
		return fmt.Errorf("kubeconfig %s: %w", path, &fs.PathError{Op: "stat", Path: dir, Err: err})
	}
	if !ours(&st) {
		return refuse("directory / is owned by uid %d", st.Uid)
	}
	for len(pending) > 0 {
		name := pending[0]
		pending = pending[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			dir = filepath.Dir(dir)
			continue
		}
		p := filepath.Join(dir, name)
		if err := unix.Lstat(p, &st); err != nil {
			if errors.Is(err, unix.ENOENT) {
				return fmt.Errorf("kubeconfig %s: %w", path, errKubeconfigMissing)
			}
			return fmt.Errorf("kubeconfig %s: %w", path, &fs.PathError{Op: "lstat", Path: p, Err: err})
		}
		last := len(strings.Join(pending, "")) == 0
		switch mode := st.Mode & 0o7777; {
		case !ours(&st) && st.Mode&unix.S_IFMT == unix.S_IFLNK:
			return refuse("symbolic link %s is owned by uid %d, not by this user or root", p, st.Uid)
		case !ours(&st) && st.Mode&unix.S_IFMT == unix.S_IFDIR:
			return refuse("directory %s is owned by uid %d, not by this user or root", p, st.Uid)
		case !ours(&st):
			return refuse("it is owned by uid %d, not by this user or root", st.Uid)
		case st.Mode&unix.S_IFMT == unix.S_IFLNK:
			if links++; links > maxLinks {
				return fmt.Errorf("kubeconfig %s: %w", path, &fs.PathError{Op: "resolve", Path: p, Err: unix.ELOOP})
			}
			target, err := os.Readlink(p)
			if err != nil {
				return fmt.Errorf("kubeconfig %s: %w", path, err)
			}
			if filepath.IsAbs(target) {
				dir = "/"
			}
			pending = append(strings.Split(target, "/"), pending...)
		case st.Mode&unix.S_IFMT == unix.S_IFDIR && !last:
			if mode&0o002 != 0 && mode&unix.S_ISVTX == 0 {
				return refuse("every user may write directory %s (mode %04o)", p, mode)
			}
			dir = p
		case st.Mode&unix.S_IFMT != unix.S_IFREG || !last:
			return refuse("%s is not a regular file", p)
		case mode&0o022 != 0:
			return refuse("its group or every user may write it (mode %04o)", mode)
		}
	}
	return nil
}
