# metaclaw — build, run and test. `make run` and `make test` install what is
# missing (Debian packages with apt-get, Go modules from the module proxy).

SHELL := /bin/bash
GO ?= go
BIN := bin/metaclaw
ADDR ?= 127.0.0.1:8080
DATA ?= data
export CGO_ENABLED := 1
export PATH := $(PATH):/usr/local/go/bin

# System packages: libvips (images, through cgo) and pkg-config to find it;
# Liberation and DejaVu fonts, embedded when PDF text goes beyond Latin-1.
APT_PACKAGES := pkg-config libvips-dev fonts-liberation2 fonts-dejavu-core
# Independent readers the tests check our output with: poppler (pdftotext),
# libvips-tools (vipsheader), LibreOffice (opens our xlsx and produces
# workbooks and PDFs from another writer).
APT_TEST_PACKAGES := poppler-utils libvips-tools libreoffice-calc-nogui libreoffice-writer-nogui chromium

NPM_TEST_DIRS := bindings/ts/testdata/tsc server/web/e2e

.PHONY: deps test-deps apt build run test bench bench-peers soak wasm-examples fuzz fmt vet clean doors

deps:
	@$(MAKE) --no-print-directory apt PKGS="$(APT_PACKAGES)" APT_FLAGS=--no-install-recommends
	@# Fetch exactly the modules the build and tests import. (`go mod download`
	@# would also fetch DuckDB's static libraries for four other platforms, ~2 GB.)
	@$(GO) list -deps -test ./... >/dev/null

test-deps: deps
	@$(MAKE) --no-print-directory apt PKGS="$(APT_TEST_PACKAGES)"
	@command -v node >/dev/null || $(MAKE) --no-print-directory apt PKGS="nodejs npm"
	@# npm packages the tests use, from their lock files: TypeScript checks the
	@# served declarations; playwright-core drives Debian's Chromium.
	@for d in $(NPM_TEST_DIRS); do \
		[ -d $$d/node_modules ] && [ $$d/node_modules/.package-lock.json -nt $$d/package-lock.json ] || \
			npm ci --prefix $$d --no-audit --no-fund --loglevel=error; \
	done

apt:
	@missing=""; for p in $(PKGS); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		sudo=""; [ "$$(id -u)" -eq 0 ] || sudo=sudo; \
		$$sudo apt-get update -qq && \
		DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq $(APT_FLAGS) $$missing >/dev/null; \
	fi

# The version `metaclaw --version` prints: the nearest tag and commit.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null)

build: deps
	$(GO) build -ldflags "-X main.version=$(VERSION)" -o $(BIN) ./cmd/metaclaw

# The door test alone: every registry example through JS, the CLI, HTTP and
# MCP, bad input through every door, numbers of every Go type (issue 12).
doors: test-deps
	$(GO) test -count=1 -run 'TestDoors|TestBadInputEveryDoor|TestNumberTypes|TestEveryOpHasAnExample' ./cmd/metaclaw/

run: build
	./$(BIN) --data $(DATA) serve --addr $(ADDR)

test: test-deps
	$(GO) vet ./...
	$(GO) test -count=1 -timeout 25m ./...

bench: test-deps
	$(GO) test -run '^$$' -bench . -benchtime 3x -timeout 60m ./...

# The soak test for SOAK (default 10m): honest and hostile traffic against one
# server; RSS must settle and fsck must be clean at the end (`make test` runs
# it for 20 s).
SOAK ?= 10m
soak: test-deps
	METACLAW_SOAK=$(SOAK) $(GO) test -run '^TestSoak$$' -count=1 -timeout 60m ./server/loadtest/

# Side by side with the Node stack (ExcelJS, pdf-lib, pdfjs-dist, sharp) of
# ../shared/peers, on the same fixtures, in one run. The harness is copied
# (its directory may be read-only) and its packages installed from its lock file.
PEERS ?= ../shared/peers
PEERS_DIR ?= /tmp/metaclaw-peers
bench-peers: test-deps
	rm -rf $(PEERS_DIR) && cp -r $(PEERS) $(PEERS_DIR) && chmod -R u+w $(PEERS_DIR)
	cd $(PEERS_DIR) && npm ci --no-audit --no-fund --loglevel=error
	METACLAW_PEERS=$(PEERS_DIR) $(GO) test -run '^$$' -bench SideBySide -benchtime 1x -timeout 30m ./server/loadtest/

# The example WebAssembly modules (examples/*.wasm), with the Go toolchain.
wasm-examples:
	$(MAKE) -C examples

# Every fuzz target for FUZZTIME each (`make test` already runs their seed
# corpora as ordinary tests). A crasher lands in the package's
# testdata/fuzz/ and fails `make test` until it is fixed: commit it as a
# regression test.
FUZZTIME ?= 30s
fuzz: test-deps
	@set -e; for pkg in $$($(GO) list ./...); do \
		for target in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz' || true); do \
			echo "fuzz $$pkg $$target ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$target$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf bin
