package postgres

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/lease"
)

// listenConnectTimeout bounds each attempt to open the LISTEN connection.
const listenConnectTimeout = 10 * time.Second

// listener owns a Store's dedicated LISTEN connection, run by a
// lease.Listener from the first Wait until the Store closes.
type listener struct {
	*lease.Listener
	cfg     *pgx.ConnConfig
	channel string
	pid     atomic.Uint32 // server process of the current connection; 0 when down
}

func newListener(cfg *pgx.ConnConfig, channel string) *listener {
	l := &listener{cfg: cfg, channel: channel}
	l.Listener = lease.NewListener(l.session)
	return l
}

// session connects, listens, and delivers notifications until the
// connection fails or ctx ends. It reports whether LISTEN took effect.
func (l *listener) session(ctx context.Context, up func(), deliver func(string)) bool {
	cctx, cancel := context.WithTimeout(ctx, listenConnectTimeout)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, l.cfg)
	if err != nil {
		return false
	}
	defer closeConn(conn)
	if _, err := conn.Exec(cctx, "LISTEN "+pgx.Identifier{l.channel}.Sanitize()); err != nil {
		return false
	}
	l.pid.Store(conn.PgConn().PID())
	defer l.pid.Store(0)
	up()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return true
		}
		deliver(n.Payload)
	}
}
