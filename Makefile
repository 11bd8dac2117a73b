# regionsync — common tasks. `make demo` and `make test` are all a fresh machine needs (Go only).
GO       ?= go
BIN      := $(CURDIR)/bin
# The control-plane binaries (etcd, kube-apiserver, kube-controller-manager) are built once from
# the Go module proxy and cached outside the checkout; see scripts/control-plane.sh.
CONTROL_PLANE = $(shell scripts/control-plane.sh)
TEST_TIMEOUT ?= 40m
FUZZTIME ?= 10s

.PHONY: all help build bench bench-quick bench-tracing docker-build agent-image-offline kind-node-image test-e2e test-e2e-kind test test-nightly test-rules test-unit soak fuzz demo lint lint-fix generate control-plane clean

all: build

help: ## List the targets with what each does.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-22s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## Build the agent, the hub, region-kubeconfig and the kubectl plugin (cmd/), and the demo and its tenant operator (test/cmd/), into bin/.
	$(GO) build -ldflags "-X main.Version=$(VERSION)" -o $(BIN)/ ./cmd/... ./test/cmd/...

control-plane: ## Build (first time) or locate the cached control-plane binaries.
	@scripts/control-plane.sh >/dev/null

# Most integration tests wait on API servers and agents rather than compute: TEST_PARALLEL packages
# run at once (go test -p), more than the cores.
TEST_PARALLEL ?= 4
test: control-plane build test-rules ## Unit and integration tests against real API servers, and the alert rules.
	KUBEBUILDER_ASSETS="$(CONTROL_PLANE)" $(GO) test -tags integration -p $(TEST_PARALLEL) -count=1 -timeout $(TEST_TIMEOUT) ./...

NIGHTLY_TIMEOUT ?= 90m
test-nightly: control-plane build test-rules ## make test plus the long soaks (build tag nightly), e.g. a credential renewed past a real token's 10-minute expiry.
	KUBEBUILDER_ASSETS="$(CONTROL_PLANE)" $(GO) test -tags integration,nightly -p $(TEST_PARALLEL) -count=1 -timeout $(NIGHTLY_TIMEOUT) ./...

E2E_TIMEOUT ?= 20m
test-e2e: control-plane ## End-to-end scenarios on a local fleet (fleet.StartLocal: management + 3 regions, 2 added by the scenarios; agents and the hub as processes).
	KUBEBUILDER_ASSETS="$(CONTROL_PLANE)" $(GO) test -tags e2e -count=1 -timeout $(E2E_TIMEOUT) -v ./e2e/

# kind: hack/kind/ builds a node image with no registry (Debian packages + Go module proxy), cached
# by Kubernetes version, and installs/starts Docker itself (hack/kind/README.md, docs/kind.md).
# KIND_NODE_IMAGE=kindest/node:<tag> uses a stock image instead (where it can be pulled).
KUBE_VERSION := $(shell sed -n 's/^KUBE_VERSION=//p' scripts/control-plane.sh)
KIND_NODE_IMAGE ?= regionsync.local/kind-node:$(KUBE_VERSION)
kind-node-image: ## Build (first run; later runs reuse it) the offline kind node image into the local Docker.
	hack/kind/node-image.sh

test-e2e-kind: $(if $(filter regionsync.local/%,$(KIND_NODE_IMAGE)),kind-node-image) ## The same scenarios on kind clusters (management + 2 regions + 2 added; Docker is set up if missing).
	hack/kind/docker.sh
	KIND_NODE_IMAGE=$(KIND_NODE_IMAGE) $(GO) test -tags e2e,kind -count=1 -timeout 60m -v -run 'TestKind$$' ./e2e/

MONITORING := deploy/kustomize/components/monitoring
test-rules: ## promtool: check and unit-test the Prometheus alerting rules (installs promtool if needed).
	scripts/promtool.sh check rules $(MONITORING)/regionsync.rules.yaml
	cd $(MONITORING) && $(CURDIR)/scripts/promtool.sh test rules regionsync.rules_test.yaml

# Tests that need API servers are in files built with the tag "integration" (make test sets it);
# without it only the pure-logic tests compile. REGIONSYNC_NO_CONTROL_PLANE makes any test that
# still tries to start API servers fail, so a missing tag cannot go unnoticed.
test-unit: ## Pure-logic tests only (no control plane is started).
	REGIONSYNC_NO_CONTROL_PLANE=1 $(GO) test -count=1 ./...

# make bench: the benchmark suite of docs/performance.md (bench/, build tag "bench": go test ./...
# never runs it). Real API servers, bin/agent as processes with the shipped overlays' configuration,
# every figure against a baseline measured in the same run, one table; the verdicts come from
# bench/targets.yaml. The full run (1,000 and 10,000 objects, every figure) takes about an hour on
# 2 cores; BENCH_* variables narrow it (docs/performance.md), e.g.
# make bench BENCH_SIZES=1000 BENCH_FIGURES=writes,latency.
BENCH_SIZES ?= 1000,10000
BENCH_TIMEOUT ?= 150m
bench: control-plane ## The benchmark suite: one table of ratios against same-run baselines (docs/performance.md).
	KUBEBUILDER_ASSETS="$(CONTROL_PLANE)" BENCH_SIZES="$(BENCH_SIZES)" $(GO) test -tags bench -count=1 -run '^TestBench$$' -v -timeout $(BENCH_TIMEOUT) ./bench/

bench-quick: ## The suite at 1,000 objects with short windows, 10 idle regions, a simulated fleet of 10 and 100, a rollout over 10, the hub over 10 regions, explain at 1,000 Regions (a few minutes).
	$(MAKE) bench BENCH_SIZES=1000 BENCH_CHURN=$${BENCH_CHURN:-10s} BENCH_REST=$${BENCH_REST:-10s} BENCH_IDLE_REGIONS=$${BENCH_IDLE_REGIONS:-10} BENCH_IDLE_WINDOW=$${BENCH_IDLE_WINDOW:-30s} BENCH_FLEET_REGIONS=$${BENCH_FLEET_REGIONS:-10,100} BENCH_ROLLOUT_REGIONS=$${BENCH_ROLLOUT_REGIONS:-10} BENCH_ROLLOUT_SOAK=$${BENCH_ROLLOUT_SOAK:-5s} BENCH_HUB_REGIONS=$${BENCH_HUB_REGIONS:-10} BENCH_HUB_DISTRIBUTIONS=$${BENCH_HUB_DISTRIBUTIONS:-20}

bench-tracing: control-plane ## In-process: the reconcile path's CPU with tracing off/on against no tracing code.
	KUBEBUILDER_ASSETS="$(CONTROL_PLANE)" $(GO) test ./internal/syncer/ -run XXX -bench TracingOverhead -benchtime 20000x -count 3

SOAK_RUNS ?= 10
soak: control-plane ## The test suite SOAK_RUNS times in a row with one core kept busy; prints the failures per test.
	SOAK_RUNS=$(SOAK_RUNS) scripts/soak.sh $(SOAK_PKGS)

fuzz: ## Run every fuzz target for FUZZTIME each (no control plane is started).
	REGIONSYNC_NO_CONTROL_PLANE=1 $(GO) test -run XXX -fuzz FuzzParse -fuzztime $(FUZZTIME) ./pkg/config/
	REGIONSYNC_NO_CONTROL_PLANE=1 $(GO) test -run XXX -fuzz FuzzMapping -fuzztime $(FUZZTIME) ./internal/shard/
	REGIONSYNC_NO_CONTROL_PLANE=1 $(GO) test -run XXX -fuzz FuzzOverlap -fuzztime $(FUZZTIME) ./internal/shard/
	REGIONSYNC_NO_CONTROL_PLANE=1 $(GO) test -run XXX -fuzz FuzzRender -fuzztime $(FUZZTIME) ./internal/hub/
	REGIONSYNC_NO_CONTROL_PLANE=1 $(GO) test -run XXX -fuzz FuzzHealthRule -fuzztime $(FUZZTIME) ./internal/hub/
	REGIONSYNC_NO_CONTROL_PLANE=1 $(GO) test -run XXX -fuzz FuzzDecideRollout -fuzztime $(FUZZTIME) ./internal/hub/
	REGIONSYNC_NO_CONTROL_PLANE=1 $(GO) test -run XXX -fuzz FuzzIsSubset -fuzztime $(FUZZTIME) ./internal/syncer/
	REGIONSYNC_NO_CONTROL_PLANE=1 $(GO) test -run XXX -fuzz FuzzParseFanOutSelector -fuzztime $(FUZZTIME) ./internal/syncer/
	REGIONSYNC_NO_CONTROL_PLANE=1 $(GO) test -run XXX -fuzz FuzzCompactRoundTrip -fuzztime $(FUZZTIME) ./internal/syncer/compact/
	REGIONSYNC_NO_CONTROL_PLANE=1 $(GO) test -run XXX -fuzz FuzzStringPairs -fuzztime $(FUZZTIME) ./internal/syncer/compact/
	REGIONSYNC_NO_CONTROL_PLANE=1 $(GO) test -run XXX -fuzz FuzzUUID -fuzztime $(FUZZTIME) ./internal/syncer/compact/

demo: control-plane build ## A local management cluster + 2 regions, agents syncing; Ctrl-C tears down.
	KUBEBUILDER_ASSETS="$(CONTROL_PLANE)" $(BIN)/demo --dir $(CURDIR)/.demo

IMG ?= ghcr.io/regionsync/agent:dev
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
docker-build: ## Build the agent image (needs a Docker engine and the golang/distroless base images).
	docker build --build-arg VERSION=$(VERSION) -t $(IMG) .

agent-image-offline: ## The agent image with no registry: static binaries built here, on scratch, non-root.
	hack/kind/agent-image.sh $(IMG) $(VERSION)

lint: ## gofmt, golangci-lint (.golangci.yml) and the public API check (pkg/... against the last v* tag).
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	scripts/golangci-lint.sh run
	scripts/apidiff.sh

lint-fix: ## golangci-lint with --fix: formatting, imports and the fixes linters suggest.
	scripts/golangci-lint.sh run --fix

generate: $(BIN)/controller-gen ## Regenerate deepcopy functions and CRDs from api/.
	$(BIN)/controller-gen object paths=./api/...
	$(BIN)/controller-gen crd paths=./api/v1alpha1/... output:crd:artifacts:config=deploy/crds
	$(BIN)/controller-gen crd paths=./api/demo/... output:crd:artifacts:config=deploy/crds/demo

$(BIN)/controller-gen: hack/tools/gen/go.mod
	cd hack/tools/gen && $(GO) build -o $(BIN)/controller-gen sigs.k8s.io/controller-tools/cmd/controller-gen

clean: ## Remove build outputs (the control-plane cache stays: rm -rf ~/.cache/regionsync to drop it).
	rm -rf $(BIN) .demo
