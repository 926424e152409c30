# The two commands README.md promises:
#   make run    build and run the agent with its embedded defaults
#   make test   install what the tests need, then run the whole test suite
GO      ?= go
BIN     := bin
ARGS    ?=
VERSION := $(shell git describe --always --dirty 2>/dev/null || echo dev)
REVISION := $(shell r=$$(git rev-parse HEAD 2>/dev/null) && { git diff --quiet HEAD 2>/dev/null || r=$$r-dirty; echo $$r; })
LDFLAGS := -s -w -X github.com/cantal-go/cantal/internal/buildinfo.Version=$(VERSION) -X github.com/cantal-go/cantal/internal/buildinfo.Revision=$(REVISION)

.PHONY: all setup setup-run build run test test-long bench bench-report fuzz vet clean package image

all: build

# Everything the tests need (Debian packages, Go modules, the web UI, browsers, Prometheus...).
setup:
	$(PHASE) setup sh scripts/setup.sh

# Only what building and running the agent needs (Go modules, the web UI).
setup-run:
	sh scripts/setup.sh --run

# Static binaries: no cgo.
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN)/ ./cmd/...

run: setup-run build
	./$(BIN)/cantal-agent $(ARGS)

# The client libraries are modules of their own (README "Layout"), which `./...` at the top does
# not enter: vet runs in each (so each builds with its own go.mod alone); tests, benchmarks and
# fuzz targets name their packages by import path beside the agent's (the root go.mod's replace
# directives build them from this tree), so they share one go test run.
CLIENT_MODULES := internal/jsonstr shm metrics rrdd influx
CLIENT_PKGS := $(foreach m,$(CLIENT_MODULES),github.com/cantal-go/cantal/$(m)/...)

vet:
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); echo 'gofmt needed'; exit 1; }
	$(GO) vet ./...
	for m in $(CLIENT_MODULES); do (cd $$m && $(GO) vet ./...) || exit 1; done
	cd bench && $(GO) vet ./...
	cd packaging && $(GO) vet ./...
	cd deploy && $(GO) vet ./...

# The whole suite: formatting and vet, every package under the race detector (unit, fuzz seed
# corpora, real Prometheus/InfluxDB/Chromium where a package needs them, end-to-end tests with the
# real agent binary, multi-node tests in network namespaces), the sustained ingest load test
# (20 s) without the race detector (it measures throughput; -short keeps only its short variant under -race).
# The unit packages run four at a time (-p 4): at go test's default of two (the cores) they
# used 321 s of CPU in 219 s (CI at f3aea59), the rest of the time waiting on timers and sockets.
# The bench module (peer benchmarks) is compiled by `make vet`; run it with `make bench`.
# Integration packages start real agents, Chromium, Prometheus, InfluxDB and network namespaces,
# after the unit packages. They run in three lines at once (scripts/together.sh): e2e; e2e/cluster,
# then the packaging module (packages, the image, a Debian root booted by systemd-nspawn), then
# the deploy module (Helm chart and Kubernetes manifests, checked with Helm's and Kubernetes' Go
# libraries, kept out of the agent's module); internal/web. Each owns what it uses: ports from
# the kernel (port 0, never a fixed one), its own temporary directories for agents' state,
# receivers' data and the agent binary it builds, network namespaces named with a random lab id
# (e2e/cluster) or its pid (internal/web), nspawn machines by their own name (packaging).
# Inside e2e, the tests that load their own agent hard run in a second line beside the
# machine-wide ones, and the long waits beside both (e2e/harness_test.go, docs/testing.md).
# Outages last 30 s here; `make test-long` runs the outage tests with their long lengths.
# Each phase prints its wall time (PHASE), so CI's log shows where the minutes go.
PHASE = sh scripts/phase.sh
test: setup
	$(PHASE) vet $(MAKE) --no-print-directory vet
	$(PHASE) ingest-load $(GO) test -count=1 -run 'TestLoad' -v ./internal/ingest
	$(PHASE) unit $(GO) test -count=1 -race -short -p 4 -timeout 30m $$($(GO) list ./... | grep -v -e '/e2e' -e '/internal/web$$') $(CLIENT_PKGS)
	@mkdir -p $(BIN)
	$(PHASE) integration sh scripts/together.sh \
		'$(PHASE) e2e env CANTAL_E2E_TIMES=$(CURDIR)/$(BIN)/e2e-times.txt $(GO) test -count=1 -race -short -timeout 30m ./e2e/' \
		'$(PHASE) e2e/cluster $(GO) test -count=1 -race -short -timeout 30m ./e2e/cluster/ && $(PHASE) packaging sh -c "cd packaging && $(GO) test -count=1 -timeout 20m ./..." && $(PHASE) deploy sh -c "cd deploy && $(GO) test -count=1 ./..."' \
		'$(PHASE) internal/web $(GO) test -count=1 -race -short -timeout 30m ./internal/web/'
	@head -n 31 $(BIN)/e2e-times.txt 2>/dev/null || true

# The long variants of what `make test` runs short: the outage tests with the outage the suite
# used to wait through (5 minutes of the remote-write receivers and of carbon down) and the
# ingest load test sustained for 60 s, the parallel cluster histories over a 40 MB history
# (LONG_OUTAGE=, LONG_LOAD=, LONG_HISTORY_ROUNDS= choose other lengths), the OTLP decoding
# cost estimate over 1 MiB bodies (256 KiB with -short).
LONG_OUTAGE ?= 5m
LONG_LOAD ?= 60s
LONG_HISTORY_ROUNDS ?= 200
test-long:
	CANTAL_LOAD_DURATION=$(LONG_LOAD) $(GO) test -count=1 -run 'TestLoad' -v ./internal/ingest
	$(GO) test -count=1 -race -run 'TestOTLPCostCoversDecoding' -v ./internal/ingest
	CANTAL_E2E_OUTAGE=$(LONG_OUTAGE) CANTAL_E2E_HISTORY_ROUNDS=$(LONG_HISTORY_ROUNDS) \
		$(GO) test -count=1 -race -v -timeout 30m \
		-run 'TestRemoteWriteLossless|TestCarbonResendsAfterOutage|TestParallelClusterHistoryMemoryBounded' ./e2e/

bench:
	cd bench && $(GO) test -run '^$$' -bench . -benchmem -timeout 60m ./...
	$(GO) test -run '^$$' -bench . -benchmem ./... $(CLIENT_PKGS)

# A short run of every fuzz target (FUZZTIME each).
FUZZTIME ?= 30s
fuzz:
	@for pkg in $$($(GO) list ./... $(CLIENT_PKGS)); do \
		for f in $$($(GO) test -list '^Fuzz' $$pkg 2>/dev/null | grep '^Fuzz'); do \
			echo "fuzz $$pkg $$f"; \
			$(GO) test -run '^$$' -fuzz "^$$f\$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
		done; \
	done

clean:
	rm -rf $(BIN) dist

# Packages (packaging/, its own module: nfpm and go-containerregistry stay out of the agent's).
# PKG_VERSION: the tag without its v when HEAD is tagged, else 0.0.0~git<commit time>.<hash>
# (so each commit's package upgrades the one before). Files dated at the commit's time.
ARCHES      ?= amd64 arm64
IMAGE_ARCH  ?= $(shell $(GO) env GOARCH)
PKG_DATE    := $(shell git log -1 --format=%ct 2>/dev/null || echo 0)
PKG_VERSION ?= $(shell git describe --tags --exact-match --match 'v[0-9]*' 2>/dev/null | sed 's/^v//' | grep . || git log -1 --format=0.0.0~git%cd.%h --date=format-local:%Y%m%d%H%M%S 2>/dev/null || echo 0.0.0)
package:
	for a in $(ARCHES); do CGO_ENABLED=0 GOARCH=$$a $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o dist/bin/$$a/ ./cmd/... || exit 1; done
	cd packaging && $(GO) run ./cmd/cantal-package packages -version '$(PKG_VERSION)' -date $(PKG_DATE) -bins ../dist/bin -out ../dist $(ARCHES)

# The agent's OCI image archive, built without a container daemon: dist/cantal-agent-<version>.oci.tar.
image:
	CGO_ENABLED=0 GOARCH=$(IMAGE_ARCH) $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o dist/bin/$(IMAGE_ARCH)/ ./cmd/cantal-agent
	cd packaging && $(GO) run ./cmd/cantal-package image -version '$(PKG_VERSION)' -date $(PKG_DATE) -agent ../dist/bin/$(IMAGE_ARCH)/cantal-agent -arch $(IMAGE_ARCH) -out ../dist

# The side-by-side performance and resilience report (BENCHMARKS.md); durations by env, see the script.
bench-report:
	sh scripts/bench-report.sh
