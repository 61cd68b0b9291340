//go:build !nokubernetes

package stores

import _ "github.com/leaderrun/leaderrun/lease/kubernetes" // k8s://
