package postgres

import (
	"context"
	"errors"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sys/unix"

	"github.com/leaderrun/leaderrun/lease"
)

// Pool sizing. Every statement is short, so a few connections serve many
// concurrent callers.
const (
	maxBusy = 4
	maxIdle = 4
	// checkAfter is how long a connection may sit idle before it is
	// checked (without a round trip) for having been closed by the peer.
	checkAfter   = time.Second
	closeTimeout = time.Second
)

// pool hands out connections for single statements. After a network error
// it closes the failed connection and every idle one, since after a server
// restart, a failover or a partition they are all dead: the next statement
// dials afresh, and with target_session_attrs finds the new primary.
type pool struct {
	cfg  *pgx.ConnConfig
	busy chan struct{} // one token per statement in flight

	mu     sync.Mutex // guards idle and closed
	idle   []idleConn // most recently used last
	closed bool
}

type idleConn struct {
	conn  *pgx.Conn
	since time.Time
}

func newPool(cfg *pgx.ConnConfig) *pool {
	return &pool{cfg: cfg, busy: make(chan struct{}, maxBusy)}
}

// do runs fn on a connection. fn's error is returned as it is.
func (p *pool) do(ctx context.Context, fn func(*pgx.Conn) error) error {
	select {
	case p.busy <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-p.busy }()
	conn, err := p.get(ctx)
	if err != nil {
		return err
	}
	err = fn(conn)
	p.put(conn, err)
	return err
}

// get returns an idle connection that still looks alive, or a new one.
func (p *pool) get(ctx context.Context) (*pgx.Conn, error) {
	for {
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			return nil, lease.ErrClosed
		}
		n := len(p.idle)
		if n == 0 {
			p.mu.Unlock()
			break
		}
		ic := p.idle[n-1]
		p.idle = p.idle[:n-1]
		p.mu.Unlock()
		if time.Since(ic.since) < checkAfter || alive(ic.conn) {
			return ic.conn, nil
		}
		closeConn(ic.conn)
	}
	return pgx.ConnectConfig(ctx, p.cfg)
}

// put keeps conn for reuse if the statement's outcome left it usable, and
// otherwise closes it together with every idle connection, unless the
// caller cancelled the statement: pgx then gave up conn, but that says
// nothing about the server, and a new connection costs a server process's
// start, which a follower that takes the name right after its Wait was
// cancelled would otherwise pay on the hand-off's path.
func (p *pool) put(conn *pgx.Conn, err error) {
	healthy := connUsable(err) && !conn.IsClosed() && conn.PgConn().TxStatus() == 'I'
	var drop []idleConn
	p.mu.Lock()
	switch {
	case !healthy && errors.Is(err, context.Canceled):
		drop = []idleConn{{conn: conn}}
	case !healthy:
		drop, p.idle = p.idle, nil
		drop = append(drop, idleConn{conn: conn})
	case p.closed || len(p.idle) >= maxIdle:
		drop = []idleConn{{conn: conn}}
	default:
		p.idle = append(p.idle, idleConn{conn: conn, since: time.Now()})
	}
	p.mu.Unlock()
	for _, ic := range drop {
		closeConn(ic.conn)
	}
}

// close closes the idle connections; connections in use are closed when
// they are put back.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	drop := p.idle
	p.idle = nil
	p.mu.Unlock()
	for _, ic := range drop {
		closeConn(ic.conn)
	}
}

// closeConn closes conn, giving the goodbye message at most closeTimeout.
func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	conn.Close(ctx)
}

// alive reports whether an idle connection's socket still looks open,
// without sending anything and without waiting: a peek that would block
// means the server neither closed it nor sent anything unasked (which, on
// an idle connection, is its goodbye: a termination notice). pgx's own
// CheckConn reads with a 1 ms deadline, which a healthy connection always
// waits out: 1 ms on every statement after a second of quiet, up to three
// times in a hand-off (the release, the follower's read and its acquire).
func alive(conn *pgx.Conn) bool {
	nc := conn.PgConn().Conn()
	if tc, ok := nc.(interface{ NetConn() net.Conn }); ok {
		nc = tc.NetConn() // TLS: peek below it
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return conn.PgConn().CheckConn() == nil
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return false
	}
	open := false
	err = rc.Control(func(fd uintptr) {
		var b [1]byte
		_, _, perr := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
		open = errors.Is(perr, unix.EAGAIN)
	})
	return err == nil && open
}
