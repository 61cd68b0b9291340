package postgres

import (
	"context"
	"net"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// countingConn counts the client's writes on a connection: pgx sends each
// flight of messages in one write and then waits for the reply, so writes
// are round trips.
type countingConn struct {
	net.Conn
	writes *atomic.Int64
}

func (c countingConn) Write(b []byte) (int, error) {
	c.writes.Add(1)
	return c.Conn.Write(b)
}

// SyscallConn keeps the pool's alive check on the real socket.
func (c countingConn) SyscallConn() (syscall.RawConn, error) {
	return c.Conn.(syscall.Conn).SyscallConn()
}

// countWrites makes s's pool dial connections that count writes into n,
// dropping the connections Open left idle.
func countWrites(s *Store, n *atomic.Int64) {
	dial := s.pool.cfg.DialFunc
	s.pool.cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: c, writes: n}, nil
	}
	s.pool.mu.Lock()
	drop := s.pool.idle
	s.pool.idle = nil
	s.pool.mu.Unlock()
	for _, ic := range drop {
		closeConn(ic.conn)
	}
}

// TestReleaseIsOneRoundTrip: a Release on a connection that never ran one
// (as every leader's is: a process releases a tenure once) is one round
// trip, not a prepare and then an execute. With leaderrun_listen=off and
// with the simple protocol too.
func TestReleaseIsOneRoundTrip(t *testing.T) {
	dsn, _ := newSchema(t)
	for _, tc := range []struct{ name, dsn string }{
		{"default", dsn},
		{"listen off", withParam(dsn, paramListen, "off")},
		{"simple protocol", withParam(dsn, "default_query_exec_mode", "simple_protocol")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openStore(t, tc.dsn)
			var writes atomic.Int64
			countWrites(s, &writes)
			ctx := testCtx(t)
			name := "n-" + randomSuffix()
			rec, err := s.Acquire(ctx, name, "a", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Renew(ctx, name, "a", rec.Token, time.Minute); err != nil {
				t.Fatal(err)
			}
			before := writes.Load()
			if err := s.Release(ctx, name, "a", rec.Token); err != nil {
				t.Fatal(err)
			}
			if got, want := writes.Load()-before, int64(1); got != want {
				t.Errorf("Release sent %d flights of messages, want %d", got, want)
			}
			if got := current(t, s, name); !got.Released {
				t.Errorf("after Release the record is %+v, want released", got)
			}
		})
	}
}

// TestReleaseSkipsOnlyItsOwnFlushWait: Release's statement turns
// synchronous_commit off for its own transaction, and the session it ran
// in keeps its setting for the statements after it (an Acquire must wait
// for its WAL flush: a grant lost in a crash could let two holders run).
func TestReleaseSkipsOnlyItsOwnFlushWait(t *testing.T) {
	dsn, _ := newSchema(t)
	s := openStore(t, dsn)
	ctx := testCtx(t)

	// Inside the statement's transaction: off, once it freed the row.
	admin := adminConn(t)
	rec, err := s.Acquire(ctx, "n", "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	tx, err := admin.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var freed string
	if err := tx.QueryRow(ctx, s.releaseSQL(), "n", "a", rec.Token, s.channel).Scan(&freed); err != nil {
		t.Fatalf("release statement: %v", err)
	}
	var inside string
	if err := tx.QueryRow(ctx, "SELECT current_setting('synchronous_commit')").Scan(&inside); err != nil {
		t.Fatal(err)
	}
	if got, want := inside, "off"; got != want {
		t.Errorf("synchronous_commit in the release's transaction = %q, want %q", got, want)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}

	// In the store's session: unchanged after the Release.
	setting := func() (pid uint32, value string) {
		t.Helper()
		err := s.do(ctx, func(conn *pgx.Conn) error {
			pid = conn.PgConn().PID()
			return conn.QueryRow(ctx, "SELECT current_setting('synchronous_commit')").Scan(&value)
		})
		if err != nil {
			t.Fatal(err)
		}
		return pid, value
	}
	pid, before := setting()
	if err := s.Release(ctx, "n", "a", rec.Token); err != nil {
		t.Fatal(err)
	}
	pidAfter, after := setting()
	if pidAfter != pid {
		t.Fatalf("the pool used server process %d, then %d; the check needs one session", pid, pidAfter)
	}
	if after != before {
		t.Errorf("synchronous_commit of the session after Release = %q, want %q as before it", after, before)
	}
}
