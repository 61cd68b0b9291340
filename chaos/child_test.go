package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sys/unix"
)

// tick is how often the child and the grandchild record that they are
// alive (a fenced write on PostgreSQL, a beat on SQLite).
const tick = 100 * time.Millisecond

// fenceSQLState is the SQLSTATE of a stale token (lease/postgres doc).
const fenceSQLState = "LR001"

// childMain is the recording child leaderrun supervises. It records its
// start (and whether it could take the tenure lock, i.e. whether no earlier
// tenure's process was still alive), a fenced write or beat every tick, the
// SIGTERM it ignores when armed to, and its stop. Armed to escape, it starts
// a grandchild in a new session that inherits the tenure lock.
func childMain() int {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	dir := os.Getenv(envDir)
	token := os.Getenv("LEADERRUN_TOKEN")
	rec, err := openRecorder(dir, token)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos child:", err)
		return 2
	}
	lock, err := os.OpenFile(filepath.Join(dir, lockFile), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		rec.emit("error", "err", err)
		return 2
	}
	excl := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB) == nil
	holders := ""
	if !excl {
		var st unix.Stat_t
		if unix.Fstat(int(lock.Fd()), &st) == nil {
			holders = lockHolders(st.Ino)
		}
	}
	stime, _ := procStartTime(os.Getpid())
	started := time.Now()
	rec.emitAt(started, "start", "ppid", os.Getppid(), "stime", stime,
		"holder", os.Getenv("LEADERRUN_HOLDER"), "excl", boolInt(excl), "lockholders", holders)
	if !excl {
		go func() {
			unix.Flock(int(lock.Fd()), unix.LOCK_EX)
			rec.emit("overlap-end", "waited", time.Since(started).Nanoseconds())
		}()
	}
	tok, _ := strconv.ParseInt(token, 10, 64)
	go recordLoop(rec, tok, "child")

	ignoreTerm, escaped := false, false
	poll := time.NewTicker(tick / 2)
	defer poll.Stop()
	for {
		select {
		case s := <-sigs:
			if s == syscall.SIGTERM && ignoreTerm {
				rec.emit("term-ignored")
				continue
			}
			rec.emit("stop", "signal", s.String(), "code", childExitCode)
			return childExitCode
		case <-poll.C:
			if ignoreTerm && escaped {
				continue
			}
			data, err := os.ReadFile(controlFile(dir, tok))
			if err != nil {
				continue
			}
			for _, what := range strings.Fields(string(data)) {
				switch {
				case what == armIgnoreTerm && !ignoreTerm:
					ignoreTerm = true
					rec.emit("armed", "what", what)
				case what == armEscape && !escaped:
					escaped = true
					gpid, err := startGrandchild(lock, token)
					if err != nil {
						rec.emit("error", "err", err)
						continue
					}
					rec.emit("armed", "what", what, "gpid", gpid)
				}
			}
		}
	}
}

// startGrandchild starts this binary as a grandchild in a new session, so
// that it leaves the child's process group, with the tenure lock as fd 3.
func startGrandchild(lock *os.File, token string) (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	c := exec.Command(self)
	c.Env = append(os.Environ(), envRole+"="+roleGrandchild, envToken+"="+token)
	c.ExtraFiles = []*os.File{lock}
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.Start(); err != nil {
		return 0, err
	}
	go c.Wait()
	return c.Process.Pid, nil
}

// grandchildMain records its start and then a fenced write or beat every
// tick until it is killed. Its fd 3 keeps the tenure lock held.
func grandchildMain() int {
	token := os.Getenv(envToken)
	rec, err := openRecorder(os.Getenv(envDir), token)
	if err != nil {
		return 2
	}
	stime, _ := procStartTime(os.Getpid())
	rec.emit("gstart", "ppid", os.Getppid(), "stime", stime)
	tok, _ := strconv.ParseInt(token, 10, 64)
	recordLoop(rec, tok, "grandchild")
	return 0
}

// recordLoop records a fenced write (PostgreSQL) or a beat (SQLite) every
// tick, for ever.
func recordLoop(rec *recorder, token int64, role string) {
	w := &fencedWriter{dsn: os.Getenv(envPGDSN), schema: os.Getenv(envSchema), token: token, role: role}
	t := time.NewTicker(tick)
	defer t.Stop()
	for range t.C {
		if w.dsn == "" {
			rec.emit("beat", "role", role)
			continue
		}
		at := time.Now()
		result, err := w.write()
		kv := []any{"role", role, "result", result, "took", time.Since(at).Nanoseconds()}
		if err != nil {
			kv = append(kv, "err", err)
		}
		rec.emitAt(at, "write", kv...)
	}
}

// fencedWriter makes the write a child of leaderrun would make: in one
// transaction, fence(name, token), then an insert, then commit.
type fencedWriter struct {
	dsn, schema string
	token       int64
	role        string
	conn        *pgx.Conn
}

// write returns "ok" (committed), "refused" (LR001) or "error".
func (w *fencedWriter) write() (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if w.conn == nil {
		conn, err := pgx.Connect(ctx, w.dsn)
		if err != nil {
			return "error", err
		}
		w.conn = conn
	}
	err := w.fenced(ctx)
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
		return "ok", nil
	case errors.As(err, &pgErr) && pgErr.Code == fenceSQLState:
		return "refused", nil
	}
	w.conn.Close(context.Background())
	w.conn = nil
	return "error", err
}

func (w *fencedWriter) fenced(ctx context.Context) error {
	tx, err := w.conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	schema := pgx.Identifier{w.schema}.Sanitize()
	if _, err := tx.Exec(ctx, "SELECT "+schema+".fence($1, $2)", leaseName, w.token); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+schema+".chaos_writes (token, pid, role) VALUES ($1, $2, $3)",
		w.token, os.Getpid(), w.role); err != nil {
		return err
	}
	return tx.Commit(ctx)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
