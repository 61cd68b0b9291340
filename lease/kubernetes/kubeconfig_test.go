package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/leaderrun/leaderrun/lease"
)

// otherUser owns the kubeconfigs planted here: nobody.
const otherUser = 65534

// plantedKubeconfig writes to path a kubeconfig whose exec plugin writes
// `id` to marker, for a server nobody listens on any more: a kubeconfig
// that is read runs the plugin at Open's first request.
func plantedKubeconfig(t *testing.T, path, marker string) {
	t.Helper()
	gone := newEchoServer(t, "", true)
	gone.Close()
	script := fmt.Sprintf(`id > %s; printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"planted-exec-token"}}'`, marker)
	writeKubeconfig(t, path, gone.Server, fmt.Sprintf(`    exec:
      apiVersion: client.authentication.k8s.io/v1
      interactiveMode: Never
      command: /bin/sh
      args: ["-c", %q]`, script))
}

// chown sets path's owner (not following a link), failing the test.
func chown(t *testing.T, path string, uid int) {
	t.Helper()
	if err := os.Lchown(path, uid, uid); err != nil {
		t.Fatal(err)
	}
}

func chmod(t *testing.T, path string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// TestOtherUsersKubeconfigIsRefused: a kubeconfig that another user owns,
// or could have written (the file, a directory on its way, a symbolic
// link it is reached through), is refused, naming it, before its exec
// plugin runs: the file the plugin writes never appears. That holds for
// ?kubeconfig= and for each file $KUBECONFIG lists. A kubeconfig of this
// user's, below a sticky directory every user may write (/tmp), is read:
// its plugin runs.
func TestOtherUsersKubeconfigIsRefused(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("planting another user's kubeconfig needs root")
	}
	for _, tc := range []struct {
		name string
		sub  string // the directory below the test's that holds the kubeconfig, made 0755; "" for none
		// spoil makes the kubeconfig file in the directory sub another
		// user's, or one another user could have written, and returns
		// the path to give.
		spoil func(t *testing.T, sub, file string) (kubeconfig string)
		env   bool // given in $KUBECONFIG, after a good one, rather than ?kubeconfig=
		why   string
	}{
		{name: "another user's file", spoil: func(t *testing.T, _, file string) string {
			chown(t, file, otherUser)
			return file
		}, why: "it is owned by uid 65534"},
		{name: "another user's file listed in KUBECONFIG", env: true, spoil: func(t *testing.T, _, file string) string {
			chown(t, file, otherUser)
			return file
		}, why: "it is owned by uid 65534"},
		{name: "a file the group may write", spoil: func(t *testing.T, _, file string) string {
			chmod(t, file, 0o620)
			return file
		}, why: "its group or every user may write it (mode 0620)"},
		{name: "in another user's directory", sub: "theirs", spoil: func(t *testing.T, sub, file string) string {
			chown(t, sub, otherUser)
			return file
		}, why: "directory DIR/theirs is owned by uid 65534"},
		{name: "in a directory every user may write", sub: "open", spoil: func(t *testing.T, sub, file string) string {
			chmod(t, sub, 0o777)
			return file
		}, why: "every user may write directory DIR/open (mode 0777)"},
		{name: "through another user's symbolic link", spoil: func(t *testing.T, sub, _ string) string {
			link := filepath.Join(sub, "link")
			if err := os.Symlink("config", link); err != nil {
				t.Fatal(err)
			}
			chown(t, link, otherUser)
			return link
		}, why: "symbolic link DIR/link is owned by uid 65534"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			marker := filepath.Join(dir, "ran")
			sub := filepath.Join(dir, tc.sub)
			if err := os.MkdirAll(sub, 0o755); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(sub, "config")
			plantedKubeconfig(t, file, marker)
			kubeconfig := tc.spoil(t, sub, file)
			dsn := "k8s://ns?kubeconfig=" + kubeconfig
			if tc.env {
				good := filepath.Join(t.TempDir(), "good")
				if err := os.WriteFile(good, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				t.Setenv("KUBECONFIG", good+string(os.PathListSeparator)+kubeconfig)
				dsn = "k8s://ns"
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := Open(ctx, dsn)
			if !errors.Is(err, lease.ErrRefused) {
				t.Errorf("Open = %v, want a refusal", err)
			}
			if want := "kubeconfig " + kubeconfig + ": " + strings.ReplaceAll(tc.why, "DIR", dir); err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("Open = %v, want it to say %q", err, want)
			}
			if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the kubeconfig's exec plugin ran (%s: %v)", marker, err)
			}
		})
	}
	t.Run("this user's, below /tmp", func(t *testing.T) {
		dir := t.TempDir()
		marker := filepath.Join(dir, "ran")
		p := filepath.Join(dir, "config")
		plantedKubeconfig(t, p, marker)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := Open(ctx, "k8s://ns?kubeconfig="+p); errors.Is(err, lease.ErrRefused) {
			t.Errorf("Open = %v, want no refusal (nobody listens: a plain error)", err)
		}
		if _, err := os.Stat(marker); err != nil {
			t.Errorf("the kubeconfig's exec plugin did not run: %v", err)
		}
	})
}

// TestOldKubeconfigIsNotMigrated: client-go copies an old
// ~/.kube/.kubeconfig to ~/.kube/config when only the old one exists (as
// this user: under sudo, $HOME may be another user's), and the copy,
// this user's, would pass the check at the next start. leaderrun turns
// that off: nothing is copied.
func TestOldKubeconfigIsNotMigrated(t *testing.T) {
	dir := t.TempDir()
	old, current := filepath.Join(dir, ".kubeconfig"), filepath.Join(dir, "config")
	plantedKubeconfig(t, old, filepath.Join(dir, "ran"))
	rules := &clientcmd.ClientConfigLoadingRules{Precedence: []string{current}, MigrationRules: map[string]string{current: old}}
	if err := checkKubeconfigs(rules); err != nil {
		t.Fatal(err)
	}
	if _, err := rules.Load(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(current); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the old kubeconfig was copied to %s (%v)", current, err)
	}
}
