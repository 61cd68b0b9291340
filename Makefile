# The README's commands. `make test` is what CI runs.

GO ?= go
# Scripts and race tests of real processes share 2 cores; keep them apart.
TESTFLAGS ?= -count=1 -p 2 -timeout 12m

.PHONY: build test vet mutants

build:
	CGO_ENABLED=0 $(GO) build -trimpath -o leaderrun .

vet:
	$(GO) vet ./...

# Every package, then the lease and supervision packages again under the
# race detector.
test: vet
	CGO_ENABLED=0 $(GO) build ./...
	$(GO) test $(TESTFLAGS) ./...
	$(GO) test $(TESTFLAGS) -race ./lease/... ./supervise/... ./signals/... ./config/...

# Deliberate bugs the tests must catch (testdata/mutants); not part of CI.
mutants:
	bash testdata/mutants/run.sh
