package kubernetes

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/leaderrun/leaderrun/internal/testenv/kubetest"
	"github.com/leaderrun/leaderrun/lease"
	"github.com/leaderrun/leaderrun/lease/leasetest"
)

func TestConformance(t *testing.T) {
	srv, c := admin(t)
	leasetest.Run(t, func(t *testing.T) leasetest.Harness {
		ns := namespace(t)
		kubeconfig := srv.Kubeconfig(t, kubetest.AdminToken, "")
		return leasetest.Harness{
			Open: func(t *testing.T) lease.Store {
				s, err := Open(testCtx(t), "k8s://"+ns+"?kubeconfig="+kubeconfig)
				if err != nil {
					t.Fatal(err)
				}
				return s
			},
			Delete: func(t *testing.T, name string) {
				if err := c.CoordinationV1().Leases(ns).Delete(testCtx(t), leaseName(name), metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			},
		}
	})
}
