package main

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/leaderrun/leaderrun/internal/testenv/mysqltest"
	"github.com/leaderrun/leaderrun/internal/testenv/redistest"
)

// loopbackOnly refuses a DSN whose host is not a loopback address: the
// benchmark sends load only to this machine.
func loopbackOnly(dsn string) error {
	u, err := url.Parse(dsn)
	if err != nil {
		return fmt.Errorf("parse DSN: %w", err)
	}
	if h := u.Hostname(); h != "127.0.0.1" && h != "localhost" && h != "::1" {
		return fmt.Errorf("the DSN must name a loopback host, not %q", h)
	}
	return nil
}

// mysqlAdmin creates and drops the benchmark's MariaDB databases and
// reads the server's global status.
type mysqlAdmin struct {
	base string // the -mysql DSN
	db   *sql.DB

	mu  sync.Mutex // guards dbs
	dbs []string   // created, to drop at the end
}

func openMySQLAdmin(ctx context.Context, dsn string) (*mysqlAdmin, error) {
	if err := loopbackOnly(dsn); err != nil {
		return nil, err
	}
	db, err := mysqltest.Admin(dsn)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := db.PingContext(cctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("connect to MariaDB: %w", err)
	}
	db.SetMaxOpenConns(2)
	return &mysqlAdmin{base: dsn, db: db}, nil
}

func (a *mysqlAdmin) dsnFor(db string) string { return mysqltest.WithDatabase(a.base, db) }

func (a *mysqlAdmin) createDB(ctx context.Context, db string) error {
	if _, err := a.db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+db+"`"); err != nil {
		return err
	}
	if _, err := a.db.ExecContext(ctx, "CREATE DATABASE `"+db+"`"); err != nil {
		return fmt.Errorf("create database %s: %w", db, err)
	}
	a.mu.Lock()
	a.dbs = append(a.dbs, db)
	a.mu.Unlock()
	return nil
}

func (a *mysqlAdmin) close() {
	a.mu.Lock()
	dbs := a.dbs
	a.mu.Unlock()
	for _, db := range dbs {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		a.db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+db+"`")
		cancel()
	}
	a.db.Close()
}

func (a *mysqlAdmin) version(ctx context.Context) string {
	var v string
	if err := a.db.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err != nil {
		return "?"
	}
	return v
}

// globalStatus reads the server-wide counters Questions and Com_* (every
// client's, this benchmark's own reads included).
func (a *mysqlAdmin) globalStatus(ctx context.Context) (map[string]int64, error) {
	rows, err := a.db.QueryContext(ctx, "SHOW GLOBAL STATUS WHERE Variable_name = 'Questions' OR Variable_name LIKE 'Com\\_%'")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var k, v string
		if err := rows.Scan(&k, &v); err != nil {
			return nil, err
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, rows.Err()
}

// redisAdmin hands out key prefixes on the shared Redis server, deletes
// their keys at the end, and reads the server's command statistics.
type redisAdmin struct {
	base string // the -redis URL
	addr string // host:port

	mu       sync.Mutex // guards prefixes
	prefixes []string
}

func openRedisAdmin(ctx context.Context, dsn string) (*redisAdmin, error) {
	if err := loopbackOnly(dsn); err != nil {
		return nil, err
	}
	addr, err := redistest.Addr(dsn)
	if err != nil {
		return nil, err
	}
	a := &redisAdmin{base: dsn, addr: addr}
	if _, err := a.do(ctx, "PING"); err != nil {
		return nil, fmt.Errorf("connect to Redis: %w", err)
	}
	return a, nil
}

// dsnFor is the server's DSN with the key prefix and a client name that
// tells this group's connections apart in CLIENT LIST.
func (a *redisAdmin) dsnFor(prefix string) string {
	a.mu.Lock()
	a.prefixes = append(a.prefixes, prefix)
	a.mu.Unlock()
	return redistest.WithParam(redistest.WithParam(a.base, "leaderrun_prefix", prefix), "client_name", prefix)
}

func (a *redisAdmin) close() {
	a.mu.Lock()
	ps := a.prefixes
	a.mu.Unlock()
	for _, p := range ps {
		redistest.DeletePrefix(a.base, p)
	}
}

// do runs one command on a connection of its own and returns the reply's
// text (a bulk string, or a simple one).
func (a *redisAdmin) do(ctx context.Context, args ...string) (string, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, "tcp", a.addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := writeRESP(c, args...); err != nil {
		return "", err
	}
	return readRESPText(bufio.NewReader(c))
}

func writeRESP(c net.Conn, args ...string) error {
	var sb strings.Builder
	fmt.Fprintf(&sb, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&sb, "$%d\r\n%s\r\n", len(a), a)
	}
	_, err := c.Write([]byte(sb.String()))
	return err
}

// readRESPText reads one reply: a simple string, an error, an integer or
// a bulk string.
func readRESPText(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("redis: %s", line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

func (a *redisAdmin) version(ctx context.Context) string {
	info, err := a.do(ctx, "INFO", "server")
	if err != nil {
		return "?"
	}
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "redis_version:"); ok {
			return v
		}
	}
	return "?"
}

// commandStats is INFO commandstats: calls by command, server-wide (every
// client's, this benchmark's own included).
func (a *redisAdmin) commandStats(ctx context.Context) (map[string]int64, error) {
	info, err := a.do(ctx, "INFO", "commandstats")
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for _, l := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(l), ":")
		if !ok || !strings.HasPrefix(k, "cmdstat_") {
			continue
		}
		for _, f := range strings.Split(v, ",") {
			if n, ok := strings.CutPrefix(f, "calls="); ok {
				c, _ := strconv.ParseInt(n, 10, 64)
				out[strings.TrimPrefix(k, "cmdstat_")] = c
			}
		}
	}
	return out, nil
}

// clientAddrs lists the addresses of the connections named name (CLIENT
// LIST).
func (a *redisAdmin) clientAddrs(ctx context.Context, name string) ([]string, error) {
	list, err := a.do(ctx, "CLIENT", "LIST")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, l := range strings.Split(list, "\n") {
		var addr, nm string
		for _, f := range strings.Fields(l) {
			if v, ok := strings.CutPrefix(f, "addr="); ok {
				addr = v
			}
			if v, ok := strings.CutPrefix(f, "name="); ok {
				nm = v
			}
		}
		if nm == name && addr != "" {
			out = append(out, addr)
		}
	}
	return out, nil
}
