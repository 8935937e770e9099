# xvswitch: the two commands the README opens with are `make demo` and
# `make test`. Both install what they need first (scripts/install-deps).
SHELL := /bin/bash
export PATH := $(PATH):/usr/local/go/bin
GO ?= go
# Integration tests share two CPUs and pin DPDK lcores: run packages one at
# a time so peers of different packages never compete for the same core.
GOTEST_FLAGS ?= -count=1 -p 1 -timeout 40m
FUZZTIME ?= 5s
# The clang that builds bpf/steer.c: Debian 12's. The committed
# steer_bpfel.o is its output; `make generate` uses it, and `make bpf-check`
# fails if it would build anything else from steer.c.
CLANG_VERSION := 14
BPF2GO_TOOLS := BPF2GO_CC=clang-$(CLANG_VERSION) BPF2GO_STRIP=llvm-strip-$(CLANG_VERSION)

.PHONY: all build install demo test lint vet fmt-check staticcheck unit race fuzz-smoke guest deps-demo deps-test deps-gen generate bpf-check bench

all: build

deps-demo:
	@scripts/install-deps demo

deps-test:
	@CLANG_VERSION=$(CLANG_VERSION) scripts/install-deps test

deps-gen:
	@CLANG_VERSION=$(CLANG_VERSION) scripts/install-deps gen

# The guest kernel and initramfs for QEMU tests, cached in /var/cache/xvswitch.
guest:
	@echo "==> building (or reusing) the QEMU test guest"
	@$(GO) run ./test/cmd/build-guest

# The demo (test/cmd/demo, README.md "The demo"): bin/xvswitch run with the
# README's command line on a namespace whose veth pair's outer end is the
# NIC (XDP + AF_XDP) and a QEMU guest whose vhost-user socket xvswitch
# connects to (client mode); pings and TCP both ways with sha256 compared,
# `xvswitch show` output, the counters balanced. From a terminal the
# topology stays up until Ctrl-C; otherwise (CI, a pipe, </dev/null) it goes
# straight through. It removes everything it made on every way out, and
# exits non-zero if a check failed. Built, then run, rather than `go run`,
# so a SIGTERM to make reaches the demo itself. DEMO_FLAGS adds to its
# flags, e.g. DEMO_FLAGS='-ctl /run/xvswitch/demo.sock' when an xvswitch
# already serves the default control socket.
DEMO_FLAGS ?=
demo: deps-demo guest build
	@CGO_ENABLED=0 $(GO) build -o bin/xvswitch-demo ./test/cmd/demo
	bin/xvswitch-demo -xvswitch bin/xvswitch $(DEMO_FLAGS)

# The version `xvswitch version` prints: git describe names the commit
# (and -dirty for uncommitted changes); outside a git checkout it is empty
# and the binary falls back to what Go recorded in it.
VERSION ?= $(shell git describe --always --dirty 2>/dev/null)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
# One static binary: CGO_ENABLED=0, so it runs on any Linux of its
# architecture with no libc to match. os/user then uses Go's own resolver,
# which reads /etc/group (no NSS): a group only LDAP or sssd knows is given
# by its GID (--ctl-group, --vhost ...,group=). The check fails the build
# if the binary was linked with cgo after all.
build:
	CGO_ENABLED=0 $(GO) build -ldflags "-X main.version=$(VERSION) -X main.commit=$(COMMIT)" -o bin/xvswitch ./cmd/xvswitch
	@$(GO) version -m bin/xvswitch | grep -q 'CGO_ENABLED=0' || { echo "bin/xvswitch: not built with CGO_ENABLED=0" >&2; exit 1; }

# `make install` (as root, after `make build` or doing it): the binary,
# the systemd unit (its ExecStart= and --config rewritten for BINDIR and
# SYSCONFDIR) and the example config, which replaces no config already
# there. DESTDIR stages it for a package; `make -o build install BIN=...`
# installs a binary built elsewhere. Then: useradd (the unit's first
# comment), systemctl daemon-reload, edit the config, systemctl enable --now.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
SYSCONFDIR ?= /etc
UNITDIR ?= $(PREFIX)/lib/systemd/system
BIN ?= bin/xvswitch
install: build
	install -D -m 0755 $(BIN) $(DESTDIR)$(BINDIR)/xvswitch
	install -d -m 0755 $(DESTDIR)$(UNITDIR)
	sed -e 's|/usr/local/bin/xvswitch|$(BINDIR)/xvswitch|g' -e 's|/etc/xvswitch.conf|$(SYSCONFDIR)/xvswitch.conf|g' \
	  examples/xvswitch.service > $(DESTDIR)$(UNITDIR)/xvswitch.service
	chmod 0644 $(DESTDIR)$(UNITDIR)/xvswitch.service
	@if [ -e $(DESTDIR)$(SYSCONFDIR)/xvswitch.conf ]; then \
	  echo "keeping $(DESTDIR)$(SYSCONFDIR)/xvswitch.conf (the example is examples/xvswitch.conf)"; \
	else \
	  echo "install -D -m 0644 examples/xvswitch.conf $(DESTDIR)$(SYSCONFDIR)/xvswitch.conf"; \
	  install -D -m 0644 examples/xvswitch.conf $(DESTDIR)$(SYSCONFDIR)/xvswitch.conf; \
	fi

# The benchmark harness (cmd/xvs-bench): every scenario of BENCHMARKS.md on
# xvswitch and on DPDK testpmd, 5 alternated rounds each (latency: 3 of
# 10,000 round trips), into results/bench.{json,md,png} (~20 minutes on 2
# CPUs). BENCH_FLAGS narrows or extends it, e.g.
# BENCH_FLAGS='-scenarios 1,2 -rings split', or BENCH_FLAGS='-profile results'
# for perf profiles of the worker in scenarios 1-3 (results/profile-*.txt,
# their top functions in bench.md; needs linux-perf; ~3 minutes more).
# Needs root and DPDK (`make deps-test` installs it).
BENCH_FLAGS ?=
bench: build
	@echo "==> xvs-bench: xvswitch vs DPDK, results in results/ (load average: $$(cut -d' ' -f1-3 /proc/loadavg))"
	$(GO) run ./cmd/xvs-bench -xvswitch bin/xvswitch -out results $(BENCH_FLAGS)

# Lint and the XDP object first; the guest before `make unit` (which root
# runs as nobody) so its QEMU test has one; the race detector over the
# control plane; then every test as root, then the fuzzers.
test: deps-test lint bpf-check guest unit race
	@echo "==> go test ./... (root, namespaces, DPDK and QEMU tests included)"
	$(GO) test $(GOTEST_FLAGS) ./...
	@$(MAKE) --no-print-directory fuzz-smoke

# The quick check for contributors: every test that needs no root, by any
# user. -short skips the long integration tests (require.Long); tests
# that need root or a missing tool skip themselves (test/require), and
# XVS_REQUIRE_PRIV is unset so those skips are not failures. Root would run
# the privileged tests too (they are `make test`'s), so for root it runs as
# nobody instead (scripts/unit-unprivileged).
UNIT_FLAGS ?= -short -count=1 -timeout 10m
unit:
	@if [ "$$(id -u)" -eq 0 ]; then GO='$(GO)' UNIT_FLAGS='$(UNIT_FLAGS)' scripts/unit-unprivileged; else \
	  echo "==> unit: go test $(UNIT_FLAGS) ./... as $$(id -un), XVS_REQUIRE_PRIV unset"; \
	  env -u XVS_REQUIRE_PRIV $(GO) test $(UNIT_FLAGS) ./...; fi

# The control plane and the device lifecycle under the race detector: the
# control protocol, the vhost-user devices (sessions, rings published to
# pollers, breaks from the data path) and the switch's ports, workers and
# snapshots. -short leaves out the DPDK and QEMU runs, which test peers,
# not our locking.
RACE_PKGS ?= ./ctl/... ./vhost/... ./vswitch/...
race:
	@echo "==> go test -race -short $(RACE_PKGS)"
	$(GO) test -race -short -count=1 -timeout 15m $(RACE_PKGS)

# Every fuzz target runs for FUZZTIME, so the fuzzers and their corpora stay alive.
fuzz-smoke:
	@scripts/fuzz-smoke $(FUZZTIME)

lint: fmt-check vet staticcheck

fmt-check:
	@echo "==> gofmt"
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi

vet:
	@echo "==> go vet"
	$(GO) vet ./...

staticcheck:
	@echo "==> staticcheck"
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...

# Regenerates bpf/'s committed bpf2go output with the pinned clang; needs
# clang-$(CLANG_VERSION), llvm-$(CLANG_VERSION), libbpf-dev (deps-gen installs them).
generate: deps-gen
	$(BPF2GO_TOOLS) $(GO) generate ./bpf

# Regenerates it in a temporary copy of the tree and fails if that differs
# from the checkout's steer_bpfel.o and steer_bpfel.go (scripts/bpf-check).
bpf-check: deps-gen
	@CLANG_VERSION=$(CLANG_VERSION) GO=$(GO) scripts/bpf-check
