// Command kube-apiserver builds the Kubernetes API server from the
// published k8s.io modules, for leaderrun's Kubernetes store tests only.
// It lives in its own module so that the main module does not depend on
// k8s.io/kubernetes; internal/kubetest builds it into the Go build cache.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
