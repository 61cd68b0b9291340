//go:build noetcd

package stores

import "github.com/leaderrun/leaderrun/lease"

func init() { lease.RegisterLeftOut("noetcd", "etcd", "etcds") }
