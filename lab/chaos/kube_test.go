package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/leaderrun/leaderrun/internal/testenv/kubetest"
)

// The suite runs on the Kubernetes store too (k8s,
// partitioned-k8s): an API server of the run's own (package kubetest),
// reached by each replica through a proxy of its own. Its server's faults
// are outages: the API server, or its etcd, killed and started again.
func init() {
	storeKinds = append(storeKinds, "k8s")
	taggedStores["k8s"] = taggedStore{setup: (*cluster).setupKube, faults: []string{faultAPIServer, faultKubeEtcd}}
	outages[faultAPIServer] = outage{healed: "the API server served again"}
	outages[faultKubeEtcd] = outage{healed: "the API server served again"}
}

// The Kubernetes store's server faults. The store keeps no time of its
// own (renewTime is the writer's reading of the API server's clock), so
// an outage extends no lease.
const (
	// faultAPIServer SIGKILLs the kube-apiserver and starts it again after
	// a while (its start takes seconds more): every replica is hit, and
	// none can renew until it serves again.
	faultAPIServer = "apiserver-restart"
	// faultKubeEtcd SIGKILLs the API server's etcd and starts it again
	// after a while: the API server runs on, but cannot read or write.
	faultKubeEtcd = "kube-etcd-restart"
)

// setupKube starts the run's own API server and namespace; each replica
// reaches the server through a proxy of its own, with a kubeconfig of its
// own that names the proxy, as the administrator.
func (c *cluster) setupKube(t *testing.T, n int) {
	srv := kubetest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns, err := srv.CreateNamespace(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dsns := make([]string, n)
	for i, a := range c.proxyEach(t, n, srv.Addr()) {
		path := filepath.Join(c.dir, "kubeconfig-r"+strconv.Itoa(i))
		if err := srv.WriteKubeconfigVia(path, a[0], kubetest.AdminToken, ns); err != nil {
			t.Fatal(err)
		}
		dsns[i] = "k8s://" + ns + "?kubeconfig=" + path
	}
	c.dsn = func(i int) string { return dsns[i] }
	restart := func(p kubetest.Process, lo time.Duration) func(*fault, *rand.Rand) {
		return func(f *fault, rng *rand.Rand) {
			var err error
			f.at, f.healAt, f.note, err = restartKube(srv, p, randDur(rng, lo, c.timing.ttl))
			if err != nil {
				f.problems = append(f.problems, err.Error())
			}
		}
	}
	c.injectors = map[string]func(*fault, *rand.Rand){
		faultAPIServer: restart(kubetest.APIServer, 0),
		faultKubeEtcd:  restart(kubetest.Etcd, 200*time.Millisecond),
	}
}

// restartKube kills the server's process p and starts it again d after the
// kill; it returns when the kill happened, when the API server served
// again, and a note of how long it was down.
func restartKube(srv *kubetest.Server, p kubetest.Process, d time.Duration) (killed, served time.Time, note string, err error) {
	killed = time.Now()
	if err := srv.Kill(p); err != nil {
		return killed, time.Now(), "", err
	}
	time.Sleep(time.Until(killed.Add(d)))
	started := time.Now()
	err = srv.Restart(p)
	served = time.Now()
	if err != nil {
		err = fmt.Errorf("restart %s: %w", p, err)
	}
	return killed, served, fmt.Sprintf("%s down %v, serving %v after its start",
		p, served.Sub(killed).Round(time.Millisecond), served.Sub(started).Round(time.Millisecond)), err
}
