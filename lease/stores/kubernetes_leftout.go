//go:build nokubernetes

package stores

import "github.com/leaderrun/leaderrun/lease"

func init() { lease.RegisterLeftOut("nokubernetes", "k8s") }
