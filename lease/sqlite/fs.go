package sqlite

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/lease"
)

// networkFS names the statfs magic numbers of filesystems whose byte-range
// locks cannot be trusted to exclude processes on other hosts, or at all.
var networkFS = map[uint32]string{
	0x6969:     "nfs",
	0x517b:     "smb",
	0xff534d42: "cifs",
	0xfe534d42: "smb2",
	0x01021997: "9p",
	0x00c36400: "ceph",
	0x5346414f: "afs",
	0x6b414653: "afs",
	0x0bd00bd0: "lustre",
	0x01161970: "gfs2",
	0x7461636f: "ocfs2",
	0x73757245: "coda",
	0x564c:     "ncp",
	0x47504653: "gpfs",
	0x19830326: "beegfs",
	0x20030528: "orangefs",
}

// fuseMagic is the statfs magic number of every FUSE filesystem; which one
// it is shows only in the mount table.
const fuseMagic = 0x65735546

// networkFUSE lists FUSE subtypes (the part after "fuse." in the mount
// table) that reach another host.
var networkFUSE = map[string]bool{
	"sshfs": true, "s3fs": true, "glusterfs": true, "rclone": true,
	"gcsfuse": true, "goofys": true, "cephfs": true, "ceph-fuse": true,
	"moosefs": true, "mfs": true, "lizardfs": true, "juicefs": true,
	"davfs": true, "smbnetfs": true, "curlftpfs": true, "blobfuse": true,
	"blobfuse2": true, "seaweedfs": true, "beegfs": true,
}

// classifyFS names the network filesystem a statfs magic number (and, for
// FUSE, the mount's fstype as /proc/self/mountinfo spells it) stands for,
// or returns "" for a local filesystem.
func classifyFS(magic uint32, fstype string) string {
	if name, ok := networkFS[magic]; ok {
		return name
	}
	if magic == fuseMagic {
		sub, ok := strings.CutPrefix(fstype, "fuse.")
		if !ok {
			sub, ok = strings.CutPrefix(fstype, "fuseblk.")
		}
		if ok && networkFUSE[sub] {
			return fstype
		}
	}
	return ""
}

// detectNetworkFS is networkFSOf; tests replace it to fake a network
// filesystem.
var detectNetworkFS = networkFSOf

// networkFSOf returns the name of the network filesystem dir is on, or "".
func networkFSOf(dir string) (string, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return "", &fs.PathError{Op: "statfs", Path: dir, Err: err}
	}
	magic := uint32(st.Type)
	fstype := ""
	if magic == fuseMagic {
		fstype = mountFSType(dir)
	}
	return classifyFS(magic, fstype), nil
}

// mountFSType returns the fstype of the mount that holds dir, from
// /proc/self/mountinfo, or "" if it cannot tell.
func mountFSType(dir string) string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return ""
	}
	defer f.Close()
	dir, err = filepath.EvalSymlinks(dir)
	if err != nil {
		return ""
	}
	best, fstype := -1, ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// id parent major:minor root mountpoint options [optional...] - fstype source super
		fields := strings.Fields(sc.Text())
		sep := -1
		for i, f := range fields {
			if f == "-" {
				sep = i
				break
			}
		}
		if len(fields) < 5 || sep < 0 || sep+1 >= len(fields) {
			continue
		}
		mp := unescapeMount(fields[4])
		if within(dir, mp) && len(mp) > best {
			best, fstype = len(mp), fields[sep+1]
		}
	}
	return fstype
}

// unescapeMount undoes the octal escapes (\040 for a space) of mountinfo.
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			ok := true
			for _, d := range s[i+1 : i+4] {
				if d < '0' || d > '7' {
					ok = false
				}
				c = c*8 + byte(d-'0')
			}
			if ok {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// within reports whether path is dir or below it.
func within(path, dir string) bool {
	if dir == "/" {
		return true
	}
	return path == dir || strings.HasPrefix(path, dir+"/")
}

// prepare checks that path can hold the database and creates what is
// missing (unless existing): directories with mode 0700 and an empty
// database file with mode 0600, whatever the umask. It refuses a network
// filesystem unless allowNetworkFS, and a place another user could tamper
// with (see checkPrivate). With existing, a missing file is an error
// wrapping lease.ErrNoStore and nothing is created. It never opens an
// existing database file, because closing any descriptor of a file drops
// every POSIX lock this process (another Store, say) holds on it.
func prepare(path string, allowNetworkFS, existing bool) error {
	dir := filepath.Dir(path)
	if existing {
		if _, err := os.Lstat(path); errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%s does not exist: %w", path, lease.ErrNoStore)
		}
	}
	present := dir
	for {
		st, err := os.Stat(present)
		if err == nil {
			if !st.IsDir() {
				return fmt.Errorf("%s is not a directory", present)
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) || present == filepath.Dir(present) {
			return err
		}
		present = filepath.Dir(present)
	}
	if err := refuseNetworkFS(present, allowNetworkFS); err != nil {
		return err
	}
	if err := mkdirPrivate(dir); err != nil {
		return err
	}
	if present != dir {
		if err := refuseNetworkFS(dir, allowNetworkFS); err != nil {
			return err
		}
	}
	if err := checkPrivate(dir, true); err != nil {
		return err
	}
	// SQLite creates the -wal and -shm files next to the database, so the
	// directory must be writable even when the database exists.
	if err := unix.Access(dir, unix.W_OK|unix.X_OK); err != nil {
		var st unix.Stat_t
		if unix.Stat(dir, &st) == nil && int(st.Uid) != os.Geteuid() {
			return fmt.Errorf("%w%s", &fs.PathError{Op: "write to directory", Path: dir, Err: err}, otherOwner(st.Uid))
		}
		return &fs.PathError{Op: "write to directory", Path: dir, Err: err}
	}
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	switch {
	case err == nil:
		// Nobody has the file open yet: it did not exist a moment ago.
		// SQLite gives -wal and -shm the database file's mode.
		err = unix.Fchmod(fd, 0o600)
		if cerr := unix.Close(fd); err == nil {
			err = cerr
		}
		return err
	case errors.Is(err, unix.EEXIST):
		if err := checkPrivate(path, false); err != nil {
			return err
		}
		if err := unix.Access(path, unix.R_OK|unix.W_OK); err != nil {
			return &fs.PathError{Op: "open for writing", Path: path, Err: err}
		}
		return nil
	default:
		return &fs.PathError{Op: "create", Path: path, Err: err}
	}
}

// checkPrivate refuses a database file or directory that another user
// could tamper with: one that is a symbolic link (the file), not owned by
// this user or root, or writable by others — a sticky world-writable
// directory such as /tmp included, where another user could plant a link
// or a file of their own before leaderrun creates it.
func checkPrivate(path string, dir bool) error {
	var st unix.Stat_t
	stat := unix.Lstat
	if dir {
		stat = unix.Stat // a link to a directory is the admin's choice
	}
	if err := stat(path, &st); err != nil {
		return &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	kind := "file"
	if dir {
		kind = "directory"
	}
	euid := uint32(os.Geteuid())
	switch {
	case !dir && st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return fmt.Errorf("%s is a symbolic link: refusing to follow it to a database", path)
	case !dir && st.Mode&unix.S_IFMT != unix.S_IFREG:
		return fmt.Errorf("%s is not a regular file", path)
	case st.Uid != euid && st.Uid != 0:
		return fmt.Errorf("%s %s is owned by uid %d, not by this user (uid %d) or root: another user could replace the database; use a %s of your own",
			kind, path, st.Uid, euid, kind)
	case st.Mode&0o002 != 0:
		return fmt.Errorf("%s %s is writable by every user (mode %04o): another user could replace the database or plant a link; use a %s only you (or your group) can write",
			kind, path, st.Mode&0o7777, kind)
	}
	return nil
}

func refuseNetworkFS(dir string, allow bool) error {
	if allow {
		return nil
	}
	name, err := detectNetworkFS(dir)
	if err != nil {
		return err
	}
	if name != "" {
		return fmt.Errorf("directory is on a network filesystem (%s); locks are unreliable there (%s=1 overrides)", name, optAllowNetworkFS)
	}
	return nil
}

// mkdirPrivate creates dir and its missing parents with mode 0700,
// whatever the umask. Directories that exist are left as they are.
func mkdirPrivate(dir string) error {
	if st, err := os.Stat(dir); err == nil {
		if !st.IsDir() {
			return fmt.Errorf("%s is not a directory", dir)
		}
		return nil
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := mkdirPrivate(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil // another process made it first
		}
		return err
	}
	return os.Chmod(dir, 0o700)
}

// otherOwner explains why a store in another user's directory cannot be
// opened, even by a command that only reads it (status, watch): SQLite
// writes its -wal and -shm files next to the database to read it too.
func otherOwner(uid uint32) string {
	owner := fmt.Sprintf("uid %d", uid)
	if u, err := user.LookupId(strconv.FormatUint(uint64(uid), 10)); err == nil {
		owner = u.Username
	}
	sudo := "sudo -u " + owner
	if uid == 0 {
		sudo = "sudo"
	}
	return fmt.Sprintf(" (the store belongs to %s: run leaderrun as %s, e.g. with %s; SQLite writes next to the database even to read it)", owner, owner, sudo)
}
