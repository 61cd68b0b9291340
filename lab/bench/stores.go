package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// store is one of leaderrun's stores as the benchmark uses it.
type store struct {
	Name string // "SQLite", "PostgreSQL", "MariaDB", "Redis", "etcd"
	// fresh returns a DSN with a namespace of its own — a file, a
	// database, a key prefix — named after scope, that no other scenario
	// of this run uses; the benchmark removes it at the end.
	fresh func(ctx context.Context, scope string) (string, error)
	// ExactRemaining reports whether Get's Record.Remaining is exact (on
	// etcd it is whole seconds, an upper bound).
	ExactRemaining bool
}

// Label is the system's name in the report's tables.
func (s *store) Label() string { return "leaderrun · " + s.Name }

// storeNames orders the stores' columns.
var storeNames = []string{"SQLite", "PostgreSQL", "MariaDB", "Redis", "etcd"}

// scopeName is a database or key-prefix name for scope in this run.
func scopeName(scope string) string {
	return strings.ToLower(sanitize(fmt.Sprintf("lrbench_%d_%s", os.Getpid(), scope)))
}

// setupStores finds the stores this run can use: SQLite always, the
// servers that answer, and etcd when its binaries are on PATH. Each
// networked store is then probed with the leaderrun binary itself.
func (b *bench) setupStores(ctx context.Context) {
	b.stores = append(b.stores, &store{Name: "SQLite", ExactRemaining: true,
		fresh: func(_ context.Context, scope string) (string, error) {
			return "sqlite:" + b.tmpPath(sanitize(scope)+".db"), nil
		}})
	if b.pg != nil {
		b.stores = append(b.stores, &store{Name: "PostgreSQL", ExactRemaining: true,
			fresh: func(ctx context.Context, scope string) (string, error) {
				db := scopeName(scope)
				if err := b.pg.createDB(ctx, db); err != nil {
					return "", err
				}
				return b.pg.dsnFor(db), nil
			}})
	}
	if b.opt.mysqlDSN == "" {
		b.storeNotes["MariaDB"] = "skipped: -mysql is empty"
	} else if a, err := openMySQLAdmin(ctx, b.opt.mysqlDSN); err != nil {
		b.storeNotes["MariaDB"] = "skipped: " + err.Error()
	} else {
		b.mysql = a
		b.stores = append(b.stores, &store{Name: "MariaDB", ExactRemaining: true,
			fresh: func(ctx context.Context, scope string) (string, error) {
				db := scopeName(scope)
				if err := a.createDB(ctx, db); err != nil {
					return "", err
				}
				return a.dsnFor(db), nil
			}})
	}
	if b.opt.redisDSN == "" {
		b.storeNotes["Redis"] = "skipped: -redis is empty"
	} else if a, err := openRedisAdmin(ctx, b.opt.redisDSN); err != nil {
		b.storeNotes["Redis"] = "skipped: " + err.Error()
	} else {
		b.redis = a
		b.stores = append(b.stores, &store{Name: "Redis", ExactRemaining: true,
			fresh: func(_ context.Context, scope string) (string, error) {
				return a.dsnFor(strings.ReplaceAll(scopeName(scope), "_", "-")), nil
			}})
	}
	if b.etcdSrv != nil {
		e := b.etcdSrv
		b.stores = append(b.stores, &store{Name: "etcd",
			fresh: func(_ context.Context, scope string) (string, error) {
				return e.dsn(strings.ReplaceAll(scopeName(scope), "_", "-")), nil
			}})
	}
	// Keep only the stores the binary runs on.
	var ok []*store
	for _, s := range b.stores {
		if err := b.probeStore(ctx, s); err != nil {
			b.storeNotes[s.Name] = "skipped: " + err.Error()
			continue
		}
		ok = append(ok, s)
	}
	b.stores = ok
}

// probeStore runs `leaderrun --once` on a fresh namespace of s.
func (b *bench) probeStore(ctx context.Context, s *store) error {
	dsn, err := s.fresh(ctx, "probe-"+s.Name)
	if err != nil {
		return err
	}
	dir, _ := os.MkdirTemp(b.tmp, "probe-")
	cmd := exec.Command(b.lrBin, "--name", "bench-probe", "--store", dsn, "--once",
		"--acquire-timeout", "20s", "--log-level", "error", "--", b.childBin, "-dir", dir, "-mode", "exit")
	out, err := cmd.CombinedOutput()
	if err != nil {
		msg := strings.TrimSpace(string(out))
		if i := strings.LastIndex(msg, "\n"); i >= 0 {
			msg = msg[i+1:]
		}
		return fmt.Errorf("the leaderrun binary could not run on %s (%v: %s)", s.Name, err, msg)
	}
	return nil
}

// storeOf returns the store named name, or nil when this run has none.
func (b *bench) storeOf(name string) *store {
	for _, s := range b.stores {
		if s.Name == name {
			return s
		}
	}
	return nil
}
