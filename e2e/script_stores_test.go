package e2e

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/leaderrun/leaderrun/internal/testenv/etcdtest"
	"github.com/leaderrun/leaderrun/internal/testenv/mysqltest"
	"github.com/leaderrun/leaderrun/internal/testenv/pgtest"
	"github.com/leaderrun/leaderrun/internal/testenv/redistest"
)

// scriptStore is a store that the judge and partition scripts run on,
// each script with a store of its own.
type scriptStore struct {
	name string
	// open readies the store for t's scripts (or skips t, failing it in
	// CI) and returns the function that gives a script its own store's
	// DSN, removed when the script ends.
	open func(t *testing.T) func(env *testscript.Env) string
}

var scriptStores = []scriptStore{
	{"sqlite", func(*testing.T) func(*testscript.Env) string {
		return func(env *testscript.Env) string { return "sqlite:" + filepath.Join(env.WorkDir, "leases.db") }
	}},
	{"postgres", func(t *testing.T) func(*testscript.Env) string {
		dsn := pgtest.Require(t)
		return func(env *testscript.Env) string { return pgSchema(env, dsn) }
	}},
	{"mysql", func(t *testing.T) func(*testscript.Env) string {
		dsn := mysqltest.Require(t)
		return func(env *testscript.Env) string { return mysqlDatabase(env, dsn) }
	}},
	{"redis", func(t *testing.T) func(*testscript.Env) string {
		url := redistest.Require(t)
		return func(env *testscript.Env) string {
			prefix := redistest.RandomPrefix()
			env.Defer(func() {
				if err := redistest.DeletePrefix(url, prefix); err != nil {
					env.T().Log(err)
				}
			})
			return redistest.WithParam(url, "leaderrun_prefix", prefix)
		}
	}},
	{"etcd", func(t *testing.T) func(*testscript.Env) string {
		c := etcdtest.Start(t, etcdtest.Options{}) // three members; every script its own prefix
		return func(*testscript.Env) string {
			return "etcd://" + strings.Join(c.Endpoints(), ",") + "/" + redistest.RandomPrefix()
		}
	}},
}

// TestNetwork runs the scripts of testdata/network once per networked
// store: a replica is cut off from the store by a TCP proxy of the test's
// (proxy start), and must stop its children by the renew deadline.
func TestNetwork(t *testing.T) {
	runPerStore(t, "../testdata/network", "postgres", "mysql", "redis", "etcd")
}

// runPerStore runs the scripts of dir once per store (of those named, or
// every one), each script with LEADERRUN_STORE naming a store of its own.
func runPerStore(t *testing.T, dir string, only ...string) {
	perStore(t, dir, nil, only)
}

// runFilesPerStore runs the scripts of testdata/script that match pattern
// once per store but SQLite, on which TestScripts runs every one of them.
func runFilesPerStore(t *testing.T, pattern string) {
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts match %s: %v", pattern, err)
	}
	var others []string
	for _, s := range scriptStores {
		if s.name != "sqlite" {
			others = append(others, s.name)
		}
	}
	perStore(t, "", files, others)
}

func perStore(t *testing.T, dir string, files, only []string) {
	for _, s := range scriptStores {
		if len(only) > 0 && !slices.Contains(only, s.name) {
			continue
		}
		t.Run(s.name, func(t *testing.T) {
			storeFor := s.open(t)
			p := scriptParams(dir, func(env *testscript.Env) error {
				env.Setenv("LEADERRUN_STORE", storeFor(env))
				env.Setenv("STORE_KIND", s.name)
				return nil
			}, s.name == "postgres")
			p.Files = files
			testscript.Run(t, p)
		})
	}
}

// mysqlDatabase gives a script a database of its own on the server at dsn,
// dropped at the script's end, and returns the DSN that names it.
func mysqlDatabase(env *testscript.Env, dsn string) string {
	db := mysqltest.RandomName()
	admin, err := mysqltest.Admin(dsn)
	if err != nil {
		env.T().Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE `"+db+"`"); err != nil {
		env.T().Fatal(err)
	}
	env.Defer(func() {
		if err := mysqltest.DropDatabase(dsn, db); err != nil {
			env.T().Log(err)
		}
	})
	return mysqltest.WithDatabase(dsn, db)
}
