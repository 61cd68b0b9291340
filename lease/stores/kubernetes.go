//go:build kubernetes

// The Kubernetes store (k8s://) is built only with -tags kubernetes until
// its tests have run against a real API server in CI (see
// lease/kubernetes/doc.go).

package stores

import _ "github.com/leaderrun/leaderrun/lease/kubernetes" // k8s://
