package chaos

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"time"

	driver "github.com/go-sql-driver/mysql"

	"github.com/leaderrun/leaderrun/internal/testenv/mysqltest"
)

// mysqlFenceProcedure is lease/mysql's fence procedure, in the DSN's
// database.
const mysqlFenceProcedure = "leaderrun_fence"

// mysqlSide is the MySQL database the replicas and the children share.
type mysqlSide struct {
	dsn string // the run's database, as the server's administrator
}

func (m *mysqlSide) create() error {
	db, err := mysqltest.Admin(m.dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err = db.ExecContext(ctx, "CREATE TABLE chaos_writes ("+
		"id BIGINT NOT NULL AUTO_INCREMENT PRIMARY KEY, token BIGINT NOT NULL, part VARCHAR(16) NOT NULL, "+
		"pid INT NOT NULL, role VARCHAR(16) NOT NULL, at_us BIGINT NOT NULL) ENGINE=InnoDB")
	return err
}

func (m *mysqlSide) writes() ([]dbWrite, error) {
	db, err := mysqltest.Admin(m.dsn)
	if err != nil {
		return nil, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, "SELECT id, token, part, pid, role, at_us FROM chaos_writes ORDER BY id")
	if err != nil {
		return nil, fmt.Errorf("read chaos_writes: %w", err)
	}
	defer rows.Close()
	var ws []dbWrite
	for rows.Next() {
		var w dbWrite
		var us int64
		if err := rows.Scan(&w.id, &w.token, &w.part, &w.pid, &w.role, &us); err != nil {
			return nil, err
		}
		w.at = time.UnixMicro(us)
		ws = append(ws, w)
	}
	return ws, rows.Err()
}

// mysqlFencer writes through MySQL's fence procedure, on one session.
type mysqlFencer struct {
	fenceTarget
	db *sql.DB
}

func (w *mysqlFencer) write() (string, error) {
	if w.db == nil {
		db, err := mysqltest.Admin(w.dsn)
		if err != nil {
			return "error", err
		}
		db.SetMaxOpenConns(1)
		w.db = db
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := w.fenced(ctx)
	var myErr *driver.MySQLError
	switch {
	case err == nil:
		return "ok", nil
	case errors.As(err, &myErr) && string(myErr.SQLState[:]) == fenceSQLState:
		return "refused", nil
	}
	return "error", err
}

func (w *mysqlFencer) fenced(ctx context.Context) error {
	tx, err := w.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, "CALL `"+mysqlFenceProcedure+"`(?, ?)", w.name, w.token); err != nil {
		return err
	}
	// SYSDATE, unlike NOW, is when the statement runs.
	if _, err := tx.ExecContext(ctx, "INSERT INTO chaos_writes (token, part, pid, role, at_us) "+
		"VALUES (?, ?, ?, ?, CAST(UNIX_TIMESTAMP(SYSDATE(6)) * 1000000 AS SIGNED))",
		w.token, w.part, os.Getpid(), w.role); err != nil {
		return err
	}
	return tx.Commit()
}
