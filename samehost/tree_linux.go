package samehost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/internal/cgroupv2"
	"github.com/leaderrun/leaderrun/internal/procstat"
)

// A group kill reaches only the processes that stayed in the command's
// process group; a descendant that left it (setsid, setpgid) would outlive
// it. So the proof goes ahead only where something takes the whole tree:
//
//   - the command is the init of a PID namespace of its own (leaderrun's
//     default): when it dies, the kernel kills every process of the
//     namespace, and its pidfd reports the exit only after that;
//   - or the command runs in a cgroup the holder made for it
//     (leaderrun-PIDNS-PID-START-SEQ, supervise/cgroup.go): cgroup.kill
//     takes every process in it, wherever its session or group.
//
// tree is which of the two a command has: cgroup is the directory of its
// cgroup, or "" for a namespace's init.
type tree struct {
	cgroup string
}

// treeOf returns how the whole tree of the command child, of the holder w
// names, can be killed once the holder is dead, or an error if it cannot.
func treeOf(w Where, child *process) (tree, error) {
	var t tree
	ns, err := procstat.PIDNamespace(strconv.Itoa(child.pid))
	if err != nil {
		return t, fmt.Errorf("the leader's command: %w", err)
	}
	if ns != w.PIDNS {
		init, err := namespaceInit(child.pid)
		switch {
		case err != nil:
			return t, fmt.Errorf("the leader's command: %w", err)
		case !init:
			return t, errors.New("the leader's command runs in another PID namespace but is not its init")
		}
	} else {
		t.cgroup, err = holdersCgroup(w, child.pid)
		if err != nil {
			return t, err
		}
	}
	// What was read by pid is the command's only if it still runs.
	if child.exited() {
		return t, errors.New("the leader's command exited")
	}
	return t, nil
}

// namespaceInit reports whether process pid is PID 1 of its own PID
// namespace (the last NSpid of /proc/PID/status).
func namespaceInit(pid int) (bool, error) {
	pids, err := procstat.NSPids(pid)
	if err != nil {
		return false, err
	}
	return len(pids) > 1 && pids[len(pids)-1] == 1, nil
}

// holdersCgroup returns the directory of the cgroup that process pid runs
// in, if that is a cgroup the holder w names made for its command and this
// process may kill it.
func holdersCgroup(w Where, pid int) (string, error) {
	shares := "the leader's command shares the leader's PID namespace (--pid-namespace=false)"
	rel, ok := cgroupv2.Of(strconv.Itoa(pid))
	if !ok {
		return "", fmt.Errorf("%s and its cgroup cannot be read", shares)
	}
	if !cleanCgroupPath(rel) {
		// A cgroup outside this process's cgroup namespace reads
		// "/../…": joined to the mount, it would name another file.
		return "", fmt.Errorf("%s and its cgroup %.80q is not a clean absolute path below this process's cgroup namespace", shares, rel)
	}
	mine := fmt.Sprintf("leaderrun-%d-%d-%d-", w.PIDNS, w.Pid, w.Start)
	seq, ok := strings.CutPrefix(path.Base(rel), mine)
	if _, err := strconv.ParseUint(seq, 10, 64); !ok || err != nil {
		return "", fmt.Errorf("%s and has no cgroup of its own (it runs in %.80q): a process that left its process group would outlive the group kill", shares, rel)
	}
	root, err := cgroupv2.Root()
	if err != nil {
		return "", fmt.Errorf("%s: %w", shares, err)
	}
	dir := path.Join(root, rel)
	if err := mayKill(dir); err != nil {
		return "", fmt.Errorf("%s and its cgroup %s cannot be killed from here: %w", shares, dir, err)
	}
	return dir, nil
}

// mayKill checks that this process may write the cgroup dir's
// cgroup.kill, by opening it (which kills nothing).
func mayKill(dir string) error {
	dirfd, err := openCgroup(dir)
	if err != nil {
		return err
	}
	defer unix.Close(dirfd)
	fd, err := openCgroupFile(dirfd, dir, "cgroup.kill", unix.O_WRONLY)
	if err != nil {
		return err
	}
	unix.Close(fd)
	return nil
}

// cleanCgroupPath reports whether rel, a cgroup's path as /proc/PID/cgroup
// gives it, is absolute and clean, without "..": one that joined to the
// hierarchy's mount names a directory below it.
func cleanCgroupPath(rel string) bool {
	return path.IsAbs(rel) && path.Clean(rel) == rel && !slices.Contains(strings.Split(rel, "/"), "..")
}

// openCgroup opens the cgroup directory dir (O_PATH), which must be the
// hierarchy's mount (cgroupv2.Root) followed by a clean path: it is
// resolved from the mount's root without following any symbolic link,
// leaving the mount or crossing into another, and must be on cgroup2.
func openCgroup(dir string) (int, error) {
	root, err := cgroupv2.Root()
	if err != nil {
		return -1, err
	}
	rel, ok := strings.CutPrefix(dir, strings.TrimSuffix(root, "/")+"/")
	if !ok || !cleanCgroupPath("/"+rel) {
		return -1, fmt.Errorf("%s is not a cgroup below the hierarchy's mount %s", dir, root)
	}
	rootfd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: root, Err: err}
	}
	defer unix.Close(rootfd)
	fd, err := unix.Openat2(rootfd, rel, &unix.OpenHow{
		Flags:   unix.O_PATH | unix.O_DIRECTORY | unix.O_CLOEXEC,
		Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV,
	})
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	var fs unix.Statfs_t
	if err := unix.Fstatfs(fd, &fs); err != nil {
		unix.Close(fd)
		return -1, &os.PathError{Op: "statfs", Path: dir, Err: err}
	}
	if fs.Type != unix.CGROUP2_SUPER_MAGIC {
		unix.Close(fd)
		return -1, fmt.Errorf("%s is not on cgroup2 (file system %#x)", dir, fs.Type)
	}
	return fd, nil
}

// openCgroupFile opens the file name of the cgroup directory dirfd
// (openCgroup; dir names it in errors) with flags, O_RDONLY or
// O_WRONLY: never creating or truncating it, nor following a link.
func openCgroupFile(dirfd int, dir, name string, flags int) (int, error) {
	fd, err := unix.Openat(dirfd, name, flags|unix.O_NOFOLLOW|unix.O_NOCTTY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: dir + "/" + name, Err: err}
	}
	return fd, nil
}

// cgroupEmpty reports whether the cgroup dir holds no process: it says
// "populated 0" in cgroup.events (exited processes awaiting their reaper
// are no longer members), or it was removed (removed true).
func cgroupEmpty(dir string) (empty, removed bool, err error) {
	dirfd, err := openCgroup(dir)
	if err != nil {
		if gone(err) {
			return true, true, nil
		}
		return false, false, fmt.Errorf("read the command's cgroup: %w", err)
	}
	defer unix.Close(dirfd)
	return eventsEmpty(dirfd, dir)
}

// eventsEmpty is cgroupEmpty of the cgroup directory dirfd (openCgroup).
func eventsEmpty(dirfd int, dir string) (empty, removed bool, err error) {
	fd, err := openCgroupFile(dirfd, dir, "cgroup.events", unix.O_RDONLY)
	var data []byte
	if err == nil {
		f := os.NewFile(uintptr(fd), dir+"/cgroup.events")
		data, err = io.ReadAll(io.LimitReader(f, 4096))
		f.Close()
	}
	switch {
	case gone(err):
		return true, true, nil
	case err != nil:
		return false, false, fmt.Errorf("read the command's cgroup: %w", err)
	}
	return strings.Contains(string(data), "populated 0"), false, nil
}

// gone reports whether err says that a cgroup's file is gone with its
// cgroup: ENOENT, or ENODEV when another process removed the cgroup
// between the file's open and its read or write (two followers clearing
// one dead leader's cgroup).
func gone(err error) bool {
	return errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENODEV)
}

// killCgroup kills every process in the cgroup dir (cgroup.kill; a
// directory that openCgroup refuses is no cgroup of the hierarchy, and
// nothing is written there), waits until none is left (cgroup.events
// says "populated 0"; exited processes awaiting their reaper are no
// longer members), and removes it.
func killCgroup(ctx context.Context, dir string) error {
	dirfd, err := openCgroup(dir)
	if err == nil {
		defer unix.Close(dirfd)
		var fd int
		if fd, err = openCgroupFile(dirfd, dir, "cgroup.kill", unix.O_WRONLY); err == nil {
			_, err = unix.Write(fd, []byte("1"))
			unix.Close(fd)
		}
	}
	if err != nil {
		if gone(err) {
			return nil // removed: empty
		}
		return fmt.Errorf("kill the command's cgroup: %w", err)
	}
	for wait := 100 * time.Microsecond; ; wait = min(2*wait, 20*time.Millisecond) {
		empty, removed, err := eventsEmpty(dirfd, dir)
		switch {
		case err != nil:
			return err
		case empty:
			if !removed {
				os.Remove(dir) // or the next leaderrun to start on this host
			}
			return nil
		}
		if err := pause(ctx, wait); err != nil {
			return err
		}
	}
}
