# Signet — make targets. `make` alone lists them.
SHELL        := /usr/bin/env bash
.SHELLFLAGS  := -euo pipefail -c
KUBE_VERSION ?= v1.37.1
GO           ?= go
TOOLS        := $(GO) tool -modfile=hack/tools/go.mod
BIN          := bin
CMDS         := signet-server signet-watcher signetctl signet-node
GOTEST_FLAGS ?= -race -count=1 -timeout=30m
DAEMONS      := signet-server signet-watcher
# The daemons' built-in GODEBUG default (the environment's GODEBUG overrides it): keeps Go's
# sysmon out of deep sleep, so a wake from idle no longer restarts its 20 µs polling
# (golang/go#18236). Why, what it costs and what it saves: docs/benchmarks.md, "The Go
# runtime's sysmon".
DAEMON_GODEBUG := schedtrace=2147483647
# daemon_ldflags prepends the module's own default GODEBUG (from its go line), which -X
# would otherwise replace.
daemon_ldflags = -X=runtime.godebugDefault=$$(d=$$($(GO) list -f '{{.DefaultGODEBUG}}' ./cmd/signet-server); echo $${d:+$$d,})$(DAEMON_GODEBUG)

.DEFAULT_GOAL := help

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# What every binary reports in --version and the build_info metrics (internal/version); set
# VERSION, COMMIT or COMMIT_DATE to override, e.g. outside a git checkout. COMMIT_DATE is the
# commit's (in UTC), not the build's, so the same commit builds the same binary.
VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
COMMIT      ?= $(shell git rev-parse HEAD 2>/dev/null)
COMMIT_DATE ?= $(shell TZ=UTC0 git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null)
VERSION_PKG := github.com/signet-pki/signet/internal/version
version_ldflags = -X=$(VERSION_PKG).version=$(VERSION) -X=$(VERSION_PKG).commit=$(COMMIT) -X=$(VERSION_PKG).commitDate=$(COMMIT_DATE)

.PHONY: build
build: ## Build the binaries into bin/ (--version and build_info say VERSION, COMMIT: git describe, rev-parse).
	@mkdir -p $(BIN)
	$(GO) build -ldflags="$(daemon_ldflags) $(version_ldflags)" -o $(BIN)/ $(addprefix ./cmd/,$(DAEMONS))
	$(GO) build -ldflags="$(version_ldflags)" -o $(BIN)/ $(addprefix ./cmd/,$(filter-out $(DAEMONS),$(CMDS)))

.PHONY: kube-bins
kube-bins: ## Build kube-apiserver and etcd (KUBE_VERSION, default v1.37.1) from Go modules into .cache/ (slow once, then cached).
	./hack/kube-bins.sh $(KUBE_VERSION)

.PHONY: test-deps
test-deps: ## Build every Kubernetes binary the tests run (kube-bins plus kube-controller-manager, kube-scheduler and kubelet, and v1.36.3's etcd and kube-apiserver for the v1beta1 PodCertificateRequest tests); install containerd, runc, softhsm2, swtpm and libssl-dev if missing.
	./hack/kube-bins.sh $(KUBE_VERSION) etcd kube-apiserver kube-controller-manager kube-scheduler kubelet
	./hack/kube-bins.sh v1.36.3 etcd kube-apiserver
	./hack/node-deps.sh

.PHONY: test
test: test-deps ## Run unit tests and the integration tests on a real control plane, kube-controller-manager and a real kubelet (as root).
	$(GO) test $(GOTEST_FLAGS) ./...

.PHONY: test-unit
test-unit: ## Run the package tests, without the end-to-end suite in test/integration (installs softhsm2 and swtpm if missing).
	./hack/node-deps.sh
	$(GO) test $(GOTEST_FLAGS) $$($(GO) list ./... | grep -v -e /test/integration)

# The watcher's container image, built without a container daemon by hack/image
# (internal/ociimage: go-containerregistry as a library): a multi-platform OCI image index
# (IMAGE_PLATFORMS) of the static signet-watcher (CGO_ENABLED=0, -trimpath, the daemons'
# ldflags), on scratch with /etc/passwd and /etc/group (nonroot 65532), Debian's CA bundle
# (CA_BUNDLE, from the ca-certificates package) and a CycloneDX SBOM at
# /sbom/signet-watcher.cdx.json, or on BASE (a registry image where one is reachable, or
# oci-layout:DIR, a base vendored as an OCI layout). Every time in it is COMMIT_DATE (else
# SOURCE_DATE_EPOCH), so the same commit gives the same digest. It is named IMAGE_REPO:IMAGE_TAG (a bare name is docker.io/library/NAME, as the
# kubelet resolves it); IMAGE_TAG is VERSION with + replaced by -.
IMAGE_REPO      ?= signet-watcher
IMAGE_TAG       ?= $(subst +,-,$(VERSION))
IMAGE_DIR       ?= $(BIN)/image
IMAGE_PLATFORMS ?= linux/amd64,linux/arm64
CA_BUNDLE       ?= /etc/ssl/certs/ca-certificates.crt
BASE            ?=
REGISTRY        ?=
ifneq ($(filter image-push,$(MAKECMDGOALS)),)
ifeq ($(REGISTRY),)
$(error make image-push: set REGISTRY, e.g. make image-push REGISTRY=ghcr.io/you)
endif
endif

.PHONY: image
image: ## Build the watcher's image without a daemon (multi-arch OCI, scratch, non-root, SBOM; BASE=registry image or oci-layout:DIR): an OCI layout at bin/image/signet-watcher, an archive for ctr import/docker load at bin/image/signet-watcher.tar, tagged IMAGE_REPO:IMAGE_TAG (signet-watcher:VERSION).
	@[ -n "$(BASE)" ] || [ -r "$(CA_BUNDLE)" ] || { echo "make image: no CA bundle at $(CA_BUNDLE): install Debian's ca-certificates (apt-get install ca-certificates) or set CA_BUNDLE" >&2; exit 1; }
	$(GO) run ./hack/image build -out $(IMAGE_DIR) -repo $(IMAGE_REPO) -tag $(IMAGE_TAG) -platforms $(IMAGE_PLATFORMS) \
		-version $(VERSION) -commit "$(COMMIT)" -commit-date "$(COMMIT_DATE)" -ca-bundle $(CA_BUNDLE) $(if $(BASE),-base $(BASE)) \
		-ldflags="$(daemon_ldflags) $(version_ldflags)"

.PHONY: image-push
image-push: image ## Push the watcher's image (the index, every platform) to REGISTRY/signet-watcher:IMAGE_TAG and print its digest.
	$(GO) run ./hack/image push -layout $(IMAGE_DIR)/signet-watcher -registry $(REGISTRY)

# KEY is where the demo signer's CA key lives: file (signet-server --dev's PEM file), pkcs11
# (made inside a SoftHSM2 token) or tpm (made inside a TPM 2.0: swtpm, a separate process).
KEY ?= file
ifneq ($(filter demo,$(MAKECMDGOALS)),)
ifeq ($(filter $(KEY),file pkcs11 tpm),)
$(error make demo: unknown KEY=$(KEY): want file, pkcs11 (SoftHSM2) or tpm (swtpm))
endif
endif
# KEEP=1 leaves the demo running in the background afterwards (control plane, server,
# watcher) and prints where its folder is, how to poke at it and how to stop it.
KEEP ?=
.PHONY: demo
demo: build kube-bins ## Start a local control plane, signet-server --dev and signet-watcher, and sign a CSR end to end (KEY=pkcs11|tpm: CA key in SoftHSM2 or a TPM; KEEP=1: leave it all running).
	$(if $(filter pkcs11 tpm,$(KEY)),./hack/node-deps.sh)
	$(GO) run ./hack/demo --bin $(BIN) --kube-version $(KUBE_VERSION) --key $(KEY)$(if $(filter-out 0 no false,$(KEEP)), --keep)

.PHONY: bench
bench: build kube-bins ## Server issuance vs the bare parse+sign anchor (same run), watcher memory on a real cluster, Signet vs KCM through the API server and in a 10,000-CSR renewal storm, CA keys in hardware, TPM attestation verifications vs the raw signature checks they contain, a node's TPM-attested join vs a plain bootstrap-token join.
	$(GO) run -ldflags="$(daemon_ldflags)" ./hack/bench -out docs/benchmarks-server.md
	$(GO) run ./hack/bench -watcher-memory -kube-version $(KUBE_VERSION) -bin $(BIN) -out docs/benchmarks-watcher-memory.md
	./hack/kube-bins.sh $(KUBE_VERSION) kube-controller-manager && $(GO) run ./hack/bench -cluster -kube-version $(KUBE_VERSION) -cluster-burst 1000,5000 -cluster-pcr-burst 1000,5000 -bin $(BIN) -out docs/benchmarks-cluster.md -plot docs/benchmarks-cluster-latency.png
	$(GO) run ./hack/bench -cluster -kube-version $(KUBE_VERSION) -cluster-signers ceiling,kcm-qps,signet -cluster-burst 1000,10000 -cluster-pcr-burst 10000 -cluster-paced 0 -bin $(BIN) -out docs/benchmarks-storm.md
	./hack/node-deps.sh && $(GO) run -ldflags="$(daemon_ldflags)" ./hack/bench -hardware -out docs/benchmarks-hardware.md
	$(GO) run ./hack/bench -attestation -go $(GO) -out docs/benchmarks-attestation.md
	./hack/kube-bins.sh $(KUBE_VERSION) kube-controller-manager && $(GO) run ./hack/bench -node-join -kube-version $(KUBE_VERSION) -bin $(BIN) -out docs/benchmarks-nodejoin.md
	$(GO) run ./hack/bench -ledger-scale -out docs/benchmarks-ledger.md
	$(GO) run ./hack/bench -fleet -bin $(BIN) -out docs/benchmarks-fleet.md
	@echo "tables written to docs/benchmarks-server.md, docs/benchmarks-watcher-memory.md, docs/benchmarks-cluster.md, docs/benchmarks-storm.md, docs/benchmarks-hardware.md, docs/benchmarks-attestation.md, docs/benchmarks-nodejoin.md and docs/benchmarks-ledger.md (plot: docs/benchmarks-cluster-latency.png)"

.PHONY: generate
generate: ## Regenerate the gRPC code and the API reference (docs/api.md) from proto/.
	$(TOOLS) buf generate

.PHONY: lint
lint: ## buf lint (STANDARD) and go vet.
	$(TOOLS) buf lint
	$(GO) vet ./...

.PHONY: verify
verify: generate lint ## Fail if generated code, go.mod or gofmt is stale.
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) mod tidy -diff
	@git diff --exit-code -- proto/ docs/api.md || { echo "generated code or the API reference is stale: run 'make generate' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- proto/ docs/api.md)" || { echo "untracked generated files"; git status --porcelain -- proto/ docs/api.md; exit 1; }
