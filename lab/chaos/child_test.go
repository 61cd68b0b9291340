package chaos

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/lease"
)

// tick is how often the child and the grandchild record that they are
// alive (a fenced write on PostgreSQL, a beat on SQLite).
const tick = 100 * time.Millisecond

// fenceSQLState is the SQLSTATE of a stale token (lease/postgres doc).
const fenceSQLState = "LR001"

// childMain is the recording child leaderrun supervises. It records its
// start (and whether it could take its partition's tenure lock, i.e.
// whether no earlier tenure's process of that partition was still alive), a
// fenced write or beat every tick, the SIGTERM it ignores when armed to,
// and its stop. Armed to escape, it starts a grandchild in a new session
// that inherits the tenure lock.
func childMain() int {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT)
	dir := os.Getenv(envDir)
	token := os.Getenv("LEADERRUN_TOKEN")
	part := os.Getenv("LEADERRUN_PARTITION")
	rec, err := openRecorder(dir, token, part)
	if err != nil {
		fmt.Fprintln(os.Stderr, "chaos child:", err)
		return 2
	}
	lock, err := os.OpenFile(lockFile(dir, part), os.O_RDWR|os.O_CREATE, 0o644)
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
	kv := []any{"ppid", os.Getppid(), "stime", stime,
		"holder", os.Getenv("LEADERRUN_HOLDER"), "excl", boolInt(excl), "lockholders", holders}
	if n := os.Getenv("LEADERRUN_PARTITIONS"); n != "" {
		kv = append(kv, "partitions", n)
	}
	rec.emitAt(started, "start", kv...)
	if !excl {
		go func() {
			unix.Flock(int(lock.Fd()), unix.LOCK_EX)
			rec.emit("overlap-end", "waited", time.Since(started).Nanoseconds())
		}()
	}
	tok, _ := strconv.ParseInt(token, 10, 64)
	go recordLoop(rec, tok, part, "child")

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
			data, err := os.ReadFile(controlFile(dir, part, tok))
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
					gpid, err := startGrandchild(lock, token, part)
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
func startGrandchild(lock *os.File, token, part string) (int, error) {
	self, err := os.Executable()
	if err != nil {
		return 0, err
	}
	c := exec.Command(self)
	c.Env = append(os.Environ(), envRole+"="+roleGrandchild, envToken+"="+token, envPart+"="+part)
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
	token, part := os.Getenv(envToken), os.Getenv(envPart)
	rec, err := openRecorder(os.Getenv(envDir), token, part)
	if err != nil {
		return 2
	}
	stime, _ := procStartTime(os.Getpid())
	rec.emit("gstart", "ppid", os.Getppid(), "stime", stime)
	tok, _ := strconv.ParseInt(token, 10, 64)
	recordLoop(rec, tok, part, "grandchild")
	return 0
}

// recordLoop records a fenced write (PostgreSQL, MySQL) or a beat (the
// other stores) every tick, for ever.
func recordLoop(rec *recorder, token int64, part, role string) {
	w := newFencer(os.Getenv(envFence), fenceTarget{
		dsn: os.Getenv(envFenceDSN), schema: os.Getenv(envSchema),
		name: fenceName(part), token: token, part: part, role: role,
	})
	t := time.NewTicker(tick)
	defer t.Stop()
	for range t.C {
		if w == nil {
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

// fenceName is the lease a child of partition part ("" for one name)
// fences its writes with.
func fenceName(part string) string {
	if part == "" {
		return leaseName
	}
	p, _ := strconv.Atoi(part)
	return lease.PartitionKey(leaseName, p)
}

// fenceTarget is what a fenced write needs to know.
type fenceTarget struct {
	dsn, schema string
	name        string // the lease: the name, or a partition's key
	token       int64
	part        string
	role        string
}

// fencer makes the write a child of leaderrun would make: in one
// transaction, the store's fence for (name, token), then an insert, then
// commit. write returns "ok" (committed), "refused" (the fence's SQLSTATE
// LR001) or "error".
type fencer interface {
	write() (string, error)
}

// newFencer returns the fencer of store kind, or nil when the children
// beat instead.
func newFencer(kind string, t fenceTarget) fencer {
	switch kind {
	case fencePostgres:
		return &pgFencer{fenceTarget: t}
	case fenceMySQL:
		return &mysqlFencer{fenceTarget: t}
	}
	return nil
}

// pgFencer writes through PostgreSQL's fence function.
type pgFencer struct {
	fenceTarget
	conn *pgx.Conn
}

func (w *pgFencer) write() (string, error) {
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

func (w *pgFencer) fenced(ctx context.Context) error {
	tx, err := w.conn.Begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback(context.Background())
	schema := pgx.Identifier{w.schema}.Sanitize()
	if _, err := tx.Exec(ctx, "SELECT "+schema+".fence($1, $2)", w.name, w.token); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, "INSERT INTO "+schema+".chaos_writes (token, part, pid, role) VALUES ($1, $2, $3, $4)",
		w.token, w.part, os.Getpid(), w.role); err != nil {
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
