package etcd

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/leaderrun/leaderrun/internal/testenv/etcdtest"
)

// testCtx is a context for one test's store calls.
func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// dsnFor is the DSN of a store on addrs (host:port each) under prefix.
func dsnFor(prefix string, addrs ...string) string {
	return "etcd://" + strings.Join(addrs, ",") + "/" + prefix
}

// newPrefix picks a key prefix no other test uses on the shared cluster,
// deletes its keys when t ends, and returns the cluster and prefix.
func newPrefix(t *testing.T) (*etcdtest.Cluster, string) {
	t.Helper()
	c := etcdtest.Shared(t)
	prefix := etcdtest.RandomPrefix()
	admin := c.Client(t)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := admin.Delete(ctx, prefix+"/", clientv3.WithPrefix()); err != nil {
			t.Errorf("delete test keys: %v", err)
		}
	})
	return c, prefix
}

// openStore opens dsn and closes the store at cleanup.
func openStore(t *testing.T, dsn string) *Store {
	t.Helper()
	s, err := Open(testCtx(t), dsn)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}
