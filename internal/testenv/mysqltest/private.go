package mysqltest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/testenv/citest"
)

// Private starts a MariaDB server of tb's own (root without a password on
// 127.0.0.1, its data in tb's temp dir), stops it when tb ends, and
// returns its DSN. It is for tests that change the server's global state
// (read_only), which on the shared server would reach every other test
// running at the time. Without mariadbd and mariadb-install-db on the
// machine it skips tb (fails it in CI).
func Private(tb testing.TB) string {
	tb.Helper()
	server, install := lookSbin("mariadbd"), lookSbin("mariadb-install-db")
	if server == "" || install == "" {
		citest.Missing(tb, "this test starts a MariaDB server of its own: mariadbd and mariadb-install-db must be installed")
	}
	who := "mysql"
	if u, err := user.Current(); err == nil {
		who = u.Username
	}
	dir := tb.TempDir()
	data := filepath.Join(dir, "data")
	out, err := exec.Command(install, "--no-defaults", "--datadir="+data, "--user="+who,
		"--auth-root-authentication-method=normal", "--skip-test-db").CombinedOutput()
	if err != nil {
		tb.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	port, err := citest.FreePort()
	if err != nil {
		tb.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "server.log"))
	if err != nil {
		tb.Fatal(err)
	}
	defer log.Close()
	cmd := exec.Command(server, "--no-defaults", "--datadir="+data, "--user="+who,
		"--bind-address=127.0.0.1", "--port="+strconv.Itoa(port), "--socket="+filepath.Join(dir, "sock"),
		"--pid-file="+filepath.Join(dir, "pid"), "--skip-log-bin", "--innodb-buffer-pool-size=16M")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start mariadbd: %v", err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	tb.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
	})
	dsn := fmt.Sprintf("mysql://root@127.0.0.1:%d/", port)
	if err := awaitServer(dsn, exited); err != nil {
		logged, _ := os.ReadFile(log.Name())
		tb.Fatalf("the private MariaDB server: %v\n%s", err, logged)
	}
	return dsn
}

// lookSbin finds name on PATH or in /usr/sbin, where Debian installs
// mariadbd (not on a user's PATH).
func lookSbin(name string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if p, err := exec.LookPath(filepath.Join("/usr/sbin", name)); err == nil {
		return p
	}
	return ""
}

// awaitServer waits up to 30 s for dsn's server to answer, failing at
// once if it exited.
func awaitServer(dsn string, exited <-chan struct{}) error {
	db, err := Admin(dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		err := db.PingContext(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("mariadbd exited: %w", err)
		case <-ctx.Done():
			return fmt.Errorf("no answer within 30 s: %w", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}
