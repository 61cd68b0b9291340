//go:build !noetcd

package stores

import _ "github.com/leaderrun/leaderrun/lease/etcd" // etcd://, etcds://
