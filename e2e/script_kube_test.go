package e2e

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/leaderrun/leaderrun/internal/testenv/kubetest"
)

// The scripts that run once per store (TestFastStores, TestJudge,
// TestPartitions) run on the Kubernetes store too: an API server of each
// test's own, a namespace per script. make test-kube runs them; make test
// skips them (LEADERRUN_TEST_KUBE_SKIP).
func init() {
	scriptStores = append(scriptStores, scriptStore{"k8s", func(t *testing.T) func(*testscript.Env) string {
		srv := kubetest.Start(t)
		return func(env *testscript.Env) string {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ns, err := srv.CreateNamespace(ctx)
			if err != nil {
				env.T().Fatal(err)
			}
			kubeconfig := filepath.Join(env.WorkDir, "kubeconfig")
			if err := srv.WriteKubeconfig(kubeconfig, kubetest.AdminToken, ns); err != nil {
				env.T().Fatal(err)
			}
			return "k8s://" + ns + "?kubeconfig=" + kubeconfig
		}
	}})
}
