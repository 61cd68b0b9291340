package chaos

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/leaderrun/leaderrun/internal/testenv/etcdtest"
	"github.com/leaderrun/leaderrun/internal/testenv/mysqltest"
	"github.com/leaderrun/leaderrun/internal/testenv/pgtest"
	"github.com/leaderrun/leaderrun/internal/testenv/redistest"
	"github.com/leaderrun/leaderrun/internal/testenv/tcpproxy"
)

// storeKinds are the stores the suite runs on. Each networked store is the
// server of its internal/…test package (etcd: a three-member cluster of the
// run's own); without it the store's run skips, or fails when CI is set.
// A file of its own may add a store (k8s: kube_test.go), registering it
// in taggedStores.
var storeKinds = []string{"sqlite", "postgres", "mysql", "redis", "etcd"}

// taggedStore is a store that a file of its own adds to storeKinds.
type taggedStore struct {
	// setup is the store's case of setupStore; it also sets the
	// cluster's injectors of the store's server faults.
	setup func(c *cluster, t *testing.T, n int)
	// faults are its server's faults (serverFaults).
	faults []string
}

// taggedStores are the stores of storeKinds that files of their own
// added, by name.
var taggedStores = map[string]taggedStore{}

// setupStore readies the run's store for n replicas: each replica's --store
// (through proxies of its own on a networked store), the table of fenced
// writes where the store has a fence, the way to end a replica's sessions
// from the server's side, and the faults only this store has.
func (c *cluster) setupStore(t *testing.T, n int) {
	switch c.store {
	case "sqlite":
		c.dsn = func(int) string { return "sqlite:" + filepath.Join(c.dir, "leases.db") }
	case "postgres":
		c.setupPostgres(t, n)
	case "mysql":
		c.setupMySQL(t, n)
	case "redis":
		c.setupRedis(t, n)
	case "etcd":
		c.setupEtcd(t, n)
	default:
		if s, ok := taggedStores[c.store]; ok {
			s.setup(c, t, n)
			return
		}
		t.Fatalf("unknown store %q (known: %s)", c.store, strings.Join(storeKinds, ", "))
	}
}

// storeFaults are the faults of the run's store besides kill, term and
// stop: on a networked store, the replica's connections reset or
// blackholed, and the store's own fault.
func storeFaults(store string) []string {
	if fs := serverFaults(store); len(fs) > 0 {
		return append([]string{faultReset, faultBlackhole}, fs...)
	}
	return nil
}

// serverFaults are what the server of a networked store does to the
// replicas: end one's sessions, or, etcd, lose its leader; a tagged
// store's are its own.
func serverFaults(store string) []string {
	switch store {
	case "postgres", "mysql", "redis":
		return []string{faultKillConn}
	case "etcd":
		return []string{faultStoreLeader}
	}
	return taggedStores[store].faults
}

// runTag names a run's sessions (application name, client name, user) so
// that a fault can find one replica's among all of the server's.
func runTag() string {
	b := make([]byte, 5)
	rand.Read(b)
	return "chaos_" + hex.EncodeToString(b)
}

// proxyEach starts, for each of n replicas, a proxy to every address in
// servers, and returns each replica's proxy addresses.
func (c *cluster) proxyEach(t *testing.T, n int, servers ...string) [][]string {
	addrs := make([][]string, n)
	for i := range n {
		var ps []*tcpproxy.Proxy
		for _, s := range servers {
			p, err := tcpproxy.New(s)
			if err != nil {
				t.Fatal(err)
			}
			ps = append(ps, p)
			addrs[i] = append(addrs[i], p.Addr())
		}
		c.proxies = append(c.proxies, ps)
	}
	return addrs
}

// setupPostgres gives the run its own schema and the writes table; each
// replica reaches the server through a proxy of its own, under an
// application name of its own.
func (c *cluster) setupPostgres(t *testing.T, n int) {
	dsn, schema := pgtest.NewSchema(t)
	base := pgtest.Require(t)
	pg := &pgSide{base: base, schema: schema}
	if err := pg.create(); err != nil {
		t.Fatalf("create chaos_writes: %v", err)
	}
	c.fence = pg
	c.env = append(c.env, envFence+"="+fencePostgres, envFenceDSN+"="+base, envSchema+"="+schema)
	addr, err := pgtest.Addr(base)
	if err != nil {
		t.Fatal(err)
	}
	tag := runTag()
	dsns := make([]string, n)
	for i, a := range c.proxyEach(t, n, addr) {
		d, err := pgtest.ViaHosts(dsn, a...)
		if err != nil {
			t.Fatal(err)
		}
		dsns[i] = pgtest.WithParam(d, "application_name", tag+"_r"+strconv.Itoa(i))
	}
	c.dsn = func(i int) string { return dsns[i] }
	c.killSessions = func(i int) (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		conn, err := pgx.Connect(ctx, base)
		if err != nil {
			return 0, err
		}
		defer conn.Close(ctx)
		var killed int
		err = conn.QueryRow(ctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = $1`,
			tag+"_r"+strconv.Itoa(i)).Scan(&killed)
		return killed, err
	}
}

// setupMySQL gives the run its own database and the writes table; each
// replica reaches the server through a proxy of its own, as a user of its
// own (MariaDB names no other attribute of a session that a client sets).
func (c *cluster) setupMySQL(t *testing.T, n int) {
	dsn, db := mysqltest.NewDatabase(t)
	base := mysqltest.Require(t)
	m := &mysqlSide{dsn: dsn}
	if err := m.create(); err != nil {
		t.Fatalf("create chaos_writes: %v", err)
	}
	c.fence = m
	c.env = append(c.env, envFence+"="+fenceMySQL, envFenceDSN+"="+dsn)
	admin, err := mysqltest.Admin(base)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { admin.Close() })
	addr, err := mysqltest.Addr(base)
	if err != nil {
		t.Fatal(err)
	}
	tag := runTag()
	users := make([]string, n)
	dsns := make([]string, n)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, a := range c.proxyEach(t, n, addr) {
		users[i] = tag + "_r" + strconv.Itoa(i)
		account := "'" + users[i] + "'@'127.0.0.1'"
		for _, q := range []string{"CREATE USER " + account, "GRANT ALL PRIVILEGES ON `" + db + "`.* TO " + account} {
			if _, err := admin.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if _, err := admin.ExecContext(ctx, "DROP USER IF EXISTS "+account); err != nil {
				t.Errorf("drop user %s: %v", account, err)
			}
		})
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		u.User, u.Host = url.User(users[i]), a[0]
		dsns[i] = u.String()
	}
	c.dsn = func(i int) string { return dsns[i] }
	c.killSessions = func(i int) (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rows, err := admin.QueryContext(ctx, "SELECT ID FROM information_schema.PROCESSLIST WHERE USER = ?", users[i])
		if err != nil {
			return 0, err
		}
		var ids []int64
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return 0, err
			}
			ids = append(ids, id)
		}
		rows.Close()
		killed := 0
		for _, id := range ids {
			// A session that ended meanwhile is "unknown thread id": not killed.
			if _, err := admin.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(id, 10)); err == nil {
				killed++
			}
		}
		return killed, rows.Err()
	}
}

// setupRedis gives the run its own key prefix; each replica reaches the
// server through a proxy of its own, under a client name of its own.
func (c *cluster) setupRedis(t *testing.T, n int) {
	base := redistest.Require(t)
	dsn, _ := redistest.NewPrefix(t)
	addr, err := redistest.Addr(base)
	if err != nil {
		t.Fatal(err)
	}
	tag := runTag()
	dsns := make([]string, n)
	for i, a := range c.proxyEach(t, n, addr) {
		d, err := redistest.ViaAddr(dsn, a[0])
		if err != nil {
			t.Fatal(err)
		}
		dsns[i] = redistest.WithParam(d, "client_name", tag+"_r"+strconv.Itoa(i))
	}
	c.dsn = func(i int) string { return dsns[i] }
	c.killSessions = func(i int) (int, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		cli, err := redistest.Client(base)
		if err != nil {
			return 0, err
		}
		defer cli.Close()
		list, err := cli.ClientList(ctx).Result()
		if err != nil {
			return 0, err
		}
		killed := 0
		for _, id := range clientIDs(list, tag+"_r"+strconv.Itoa(i)) {
			if n, err := cli.Do(ctx, "CLIENT", "KILL", "ID", id).Int(); err == nil {
				killed += n
			}
		}
		return killed, nil
	}
}

// clientIDs returns the ids of the clients named name in CLIENT LIST's
// answer.
func clientIDs(list, name string) []string {
	var ids []string
	sc := bufio.NewScanner(strings.NewReader(list))
	for sc.Scan() {
		var id string
		named := false
		for _, f := range strings.Fields(sc.Text()) {
			k, v, _ := strings.Cut(f, "=")
			switch {
			case k == "id":
				id = v
			case k == "name" && v == name:
				named = true
			}
		}
		if named && id != "" {
			ids = append(ids, id)
		}
	}
	return ids
}

// setupEtcd starts the run's own three-member cluster; each replica
// reaches every member through a proxy of its own.
func (c *cluster) setupEtcd(t *testing.T, n int) {
	c.etcd = etcdtest.Start(t, etcdtest.Options{})
	prefix := etcdtest.RandomPrefix()
	dsns := make([]string, n)
	for i, a := range c.proxyEach(t, n, c.etcd.Endpoints()...) {
		dsns[i] = "etcd://" + strings.Join(a, ",") + "/" + prefix
	}
	c.dsn = func(i int) string { return dsns[i] }
}

// etcdLeaseExtension is how much longer than their TTL etcd lets leases
// live when it elects a new leader: it renews every lease by its election
// timeout (etcdtest's 600 ms), so that a lease does not expire for want of
// a leader to send keep-alives to.
const etcdLeaseExtension = 600 * time.Millisecond

// killEtcdLeader kills the member that is etcd's leader and starts it again
// after d; it returns when the kill happened, when the other members had
// elected a new leader (the store serves again), and once the cluster is
// healthy again.
func (c *cluster) killEtcdLeader(d time.Duration) (killed, elected time.Time, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	i, err := c.etcd.Leader(ctx)
	if err != nil {
		return time.Time{}, time.Time{}, fmt.Errorf("find etcd's leader: %w", err)
	}
	m := c.etcd.Member(i)
	killed = time.Now()
	m.Kill()
	for {
		if j, err := c.etcd.Leader(ctx); err == nil && j != i {
			elected = time.Now()
			break
		}
		if ctx.Err() != nil {
			elected = time.Now()
			err = fmt.Errorf("etcd elected no new leader within 10s of killing member %s", m.Name)
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(time.Until(killed.Add(d)))
	if serr := m.Start(); serr != nil {
		return killed, elected, serr
	}
	hctx, hcancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer hcancel()
	if herr := c.etcd.WaitHealthy(hctx); herr != nil {
		return killed, elected, fmt.Errorf("etcd not healthy 20s after member %s restarted: %w", m.Name, herr)
	}
	return killed, elected, err
}
