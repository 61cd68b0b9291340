package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"time"

	"github.com/leaderrun/leaderrun/lease"
	"modernc.org/sqlite"
)

// busyTimeout is how long a statement waits for another connection's write
// lock before it fails with SQLITE_BUSY. It is below any sensible renew
// interval, so that a renew attempt fails in time to be retried.
const busyTimeout = time.Second

// pragmas are set on every connection through the DSN and then read back:
// a pragma that cannot take effect (WAL on a filesystem without shared
// memory, say) is otherwise silently ignored.
var pragmas = []struct{ name, want string }{
	{"journal_mode", "wal"},
	// NORMAL: in WAL mode a commit survives a crash of any process and is
	// lost only with the OS (power loss, kernel panic); the WAL is not
	// fsynced at every commit, so a renewal holds the write lock for half
	// as long. A lease lost that way cannot matter: the boot id changes
	// with the reboot, and every lease of the old boot counts as expired
	// (docs/design.md §3).
	{"synchronous", "1"},
	{"busy_timeout", strconv.FormatInt(busyTimeout.Milliseconds(), 10)},
}

// driverDSN is the modernc.org/sqlite DSN for the database file at the
// absolute path.
func driverDSN(path string) string {
	q := url.Values{}
	q.Set("_busy_timeout", strconv.FormatInt(busyTimeout.Milliseconds(), 10))
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "NORMAL")
	// A file: URI, so that '?', '#' and '%' in the path are escaped
	// rather than taken as the start of the options.
	return "file:" + (&url.URL{Path: path}).EscapedPath() + "?" + q.Encode()
}

// openPool opens a database/sql pool of at most size connections to the
// database file at path, each checked for the pragmas before use.
// Connections are kept for the life of the pool.
func openPool(path string, size int) (*sql.DB, error) {
	base, err := sqlite.NewConnector(driverDSN(path))
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(checkedConnector{base})
	db.SetMaxOpenConns(size)
	db.SetMaxIdleConns(size)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	return db, nil
}

// checkedConnector opens connections with its embedded Connector and
// refuses any on which the pragmas did not take effect.
type checkedConnector struct{ driver.Connector }

func (c checkedConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkPragmas(ctx, conn); err != nil {
		conn.Close()
		return nil, err
	}
	return conn, nil
}

// pragmaError reports a pragma whose value is not the one the store needs.
// Retrying does not help, so it wraps lease.ErrRefused.
type pragmaError struct {
	Name, Got, Want string
}

func (e *pragmaError) Error() string {
	return fmt.Sprintf("pragma %s is %q, want %q", e.Name, e.Got, e.Want)
}

func (e *pragmaError) Unwrap() error { return lease.ErrRefused }

func checkPragmas(ctx context.Context, conn driver.Conn) error {
	q, ok := conn.(driver.QueryerContext)
	if !ok {
		return errors.New("sqlite driver connection cannot run queries")
	}
	for _, p := range pragmas {
		got, err := queryValue(ctx, q, "PRAGMA "+p.name)
		if err != nil {
			return fmt.Errorf("read pragma %s: %w", p.name, err)
		}
		if got != p.want {
			return &pragmaError{Name: p.name, Got: got, Want: p.want}
		}
	}
	return nil
}

// queryValue runs a query that returns one value and formats it.
func queryValue(ctx context.Context, q driver.QueryerContext, query string) (string, error) {
	rows, err := q.QueryContext(ctx, query, nil)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	dest := make([]driver.Value, len(rows.Columns()))
	if len(dest) != 1 {
		return "", fmt.Errorf("%s returned %d columns", query, len(dest))
	}
	if err := rows.Next(dest); err != nil {
		if err == io.EOF {
			return "", fmt.Errorf("%s returned no row", query)
		}
		return "", err
	}
	if b, ok := dest[0].([]byte); ok {
		return string(b), nil
	}
	return fmt.Sprint(dest[0]), nil
}
