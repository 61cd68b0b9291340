# The README's commands. `make test` is what CI runs.

GO ?= go
# Scripts and race tests of real processes share 2 cores; keep them apart.
TESTFLAGS ?= -count=1 -p 2 -timeout 12m

.PHONY: build test vet mutants mutants-ci kube-apiserver test-kube

# The version a built binary reports: the git description of the checkout.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)

# urfave_cli_no_docs leaves out urfave/cli's man and markdown writers, which
# leaderrun never calls: their initialisers cost every process start (the
# namespace's init, every client command) about 70 page faults.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -tags urfave_cli_no_docs -ldflags "-X github.com/leaderrun/leaderrun/cmd.Version=$(VERSION)" -o leaderrun .

vet:
	$(GO) vet ./...

# The Kubernetes store's tests run a kube-apiserver built from the k8s.io
# modules by internal/kubeapiserver (a module of its own), once per machine,
# into the Go build cache, where internal/kubetest looks for it (and builds
# it when it is missing, which may outlast a test timeout: minutes).
KUBE_APISERVER = $(shell $(GO) env GOCACHE)/leaderrun/kube-apiserver-v1.37.2
kube-apiserver:
	test -x $(KUBE_APISERVER) || { cd internal/kubeapiserver && nice -n 10 $(GO) build -o $(KUBE_APISERVER).tmp . && mv $(KUBE_APISERVER).tmp $(KUBE_APISERVER); }

# The Kubernetes store's tests against the API server (built first when it
# is missing): the store's own, the test helper's, and the scripts run once
# per store (TestFastStores, TestJudge, TestPartitions), on the k8s store
# alone. A missing server fails them here, as in CI, instead of skipping.
KUBE_SCRIPTS = ^(TestFastStores|TestJudge|TestPartitions)$$/^k8s$$
test-kube: kube-apiserver
	LEADERRUN_TEST_KUBE_REQUIRED=1 $(GO) test $(TESTFLAGS) -tags kubernetes ./internal/kubetest ./lease/kubernetes
	LEADERRUN_TEST_KUBE_REQUIRED=1 $(GO) test $(TESTFLAGS) -tags kubernetes -run '$(KUBE_SCRIPTS)' .

# Every package but the chaos suite, then the chaos suite alone (its
# TTL-bound checks missed on a loaded 2-core machine while the scripts ran
# beside it), then the lease, supervision and command packages again under
# the race detector (the leader loop's tests are in ./cmd).
test: vet
	CGO_ENABLED=0 $(GO) build ./...
	$(GO) test $(TESTFLAGS) $$($(GO) list ./... | grep -v '/chaos$$')
	$(GO) test $(TESTFLAGS) ./chaos
	GORACE=atexit_sleep_ms=0 $(GO) test $(TESTFLAGS) -race ./lease/... ./supervise/... ./signals/... ./config/... ./cmd/...

# Deliberate bugs the tests must catch (testdata/mutants): every one run.
mutants:
	bash testdata/mutants/run.sh

# CI's part of it: every patch applies and compiles, those marked
# "# ci: run" are caught (README.md, "Deliberate bugs").
mutants-ci:
	bash testdata/mutants/run.sh --ci
