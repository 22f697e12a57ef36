# delegateos — see README.md. Every target works on a clean machine with Go installed.

GO          ?= go
BIN         := $(CURDIR)/bin
STATICCHECK_VERSION := v0.8.2
FUZZTIME    ?= 5s
BENCHTIME   ?= 1s

.PHONY: all build test test-unit fuzz lint bench demo install clean docs

all: build

build:
	$(GO) build -o $(BIN)/delegateos ./cmd/delegateos

install:
	$(GO) install ./cmd/delegateos

# The README's test command: unit, integration and CLI script tests with the
# race detector, then every fuzz target for a short while.
test: test-unit fuzz

test-unit: redis chromium
	$(GO) test -race -count=1 -timeout 30m ./...

# The tests of the Redis stores start real redis-server processes: install
# Debian's package when it is missing (as root, or through sudo).
.PHONY: redis
redis:
	@command -v redis-server >/dev/null || ./scripts/install-redis.sh

# The OAuth consent page is approved in headless Chromium (Debian's
# package) by oauth/tssdk_e2e_test.go: install it when it is missing.
.PHONY: chromium
chromium:
	@command -v chromium >/dev/null || command -v chromium-browser >/dev/null || ./scripts/install-chromium.sh

fuzz:
	FUZZTIME=$(FUZZTIME) GO=$(GO) ./scripts/fuzz.sh

lint: $(BIN)/staticcheck
	$(GO) vet ./...
	$(BIN)/staticcheck ./...
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi

$(BIN)/staticcheck:
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# Verify cold and cached for 0, 1, 3 and 8 attenuations, with the Ed25519
# floor measured in the same run (the x-floor column is the ratio).
bench:
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) ./dct/ ./revocation/ ./budget/ ./contract/ ./attest/ ./chain/ ./verify/ ./reputation/

# Builds delegateos, the docserver example and the demo's MCP client into
# ./bin, saying how far the build is (a first build takes minutes), then
# narrates one delegation through the proxy (scripts/demo.sh).
demo:
	@GO=$(GO) ./scripts/demo.sh

# A task handed from a router to one of two LDP delegates (examples/ldp).
.PHONY: demo-ldp
demo-ldp: build
	$(GO) build -o $(BIN)/docserver ./examples/docserver
	DELEGATEOS=$(BIN)/delegateos DOCSERVER=$(BIN)/docserver ./examples/ldp/walkthrough.sh

# Rewrite docs/cli.md and the command table of docs/commands.md from the commands'
# own help (TestCLIReference fails when they are out of date).
docs:
	$(GO) test -count=1 -run '^TestCLIReference$$' ./cmd/delegateos -update

# tools/call latency (p50, p99) and pipelined throughput, direct to an
# upstream, through a plain byte-copying relay and through delegateos proxy,
# in one run; prints the two ratios against their targets (the proxy's added
# p50 latency at most 1.2 times the relay's, its throughput at least 0.8
# times the relay's; with PROXYBENCH_FLAGS=-audit also the proxy with an
# audit log against the proxy without, added p50 at most 1.3 times and
# throughput at least 0.5 times). PROXYBENCH_FLAGS are passed on (see
# bin/proxybench -help).
.PHONY: bench-proxy conformance
PROXYBENCH_FLAGS ?=
bench-proxy: build
	$(GO) build -o $(BIN)/proxybench ./internal/cmd/proxybench
	$(BIN)/proxybench -delegateos $(BIN)/delegateos $(PROXYBENCH_FLAGS)

# What delegateos serve adds to a tools/call over Streamable HTTP at 1, 16
# and 128 concurrent sessions (p50, p99, calls/s), next to a plain
# net/http/httputil reverse proxy, against the same upstream in one run;
# prints the ratio of the added p50s against its target (at most 1.2).
# SERVEBENCH_FLAGS are passed on (see bin/servebench -help).
.PHONY: bench-serve
SERVEBENCH_FLAGS ?=
bench-serve: build
	$(GO) build -o $(BIN)/servebench ./internal/cmd/servebench
	$(BIN)/servebench -delegateos $(BIN)/delegateos $(SERVEBENCH_FLAGS)

# What an LDP task (TASK_SUBMIT→TASK_RESULT through delegateos serve's LDP
# front, signed and checked) adds over the same tools/call sent straight to
# the upstream over stdio and to serve's MCP endpoint, taking turns in one
# run: p50, p99 and the ratios, per round and overall. LDPBENCH_FLAGS are
# passed on (-n calls of each kind, -rounds).
.PHONY: bench-ldp
LDPBENCH_FLAGS ?=
bench-ldp: build
	$(GO) build -o $(BIN)/ldpbench ./internal/cmd/ldpbench
	$(GO) build -o $(BIN)/docserver ./examples/docserver
	$(BIN)/ldpbench -delegateos $(BIN)/delegateos -docserver $(BIN)/docserver $(LDPBENCH_FLAGS)

# The official MCP conformance suite's server scenarios against
# delegateos serve (wrapping go-sdk's everything-server over stdio) and
# against the everything-server's own HTTP front; writes docs/conformance.md
# and fails if a scenario fails through delegateos serve or passes only
# without it. Installs its pinned Node packages
# (conformance/package-lock.json) and Go server itself.
conformance:
	GO=$(GO) ./conformance/run.sh

# Reservation cost per call and pipelined throughput of the spend store,
# Redis against a file, for 1 and 3 proxies, in one run (docs/measured.md,
# "A fleet on Redis").
.PHONY: bench-fleet
bench-fleet: redis
	$(GO) test -run '^$$' -bench '^BenchmarkFleet$$' -benchtime $(BENCHTIME) ./budget/

clean:
	rm -rf $(BIN)
