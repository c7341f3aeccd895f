# gputide: build, test and demo targets. Go only; no other toolchain needed.
GO       ?= go
# go-nvml's cgo code uses NVML calls its headers mark deprecated: keep the build quiet.
export CGO_CFLAGS ?= -O2 -g -Wno-deprecated-declarations
BIN      ?= bin
PKGS     ?= ./...
COMMIT   ?= $(shell git describe --always --dirty --abbrev=12 --exclude='*' 2>/dev/null)
LDFLAGS  := -X github.com/gputide/gputide/quota-broker/version.Commit=$(COMMIT)

.PHONY: all build test demo lint e2e bench fuzz fuzz-ci clean local local-down

all: build

## build: the broker CLI and daemon, and the device plugin, into bin/; the autoscaler plugins into bin/plugins/
build:
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/gputide ./quota-broker/cmd/gputide
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/nomad-device-gputide ./device-plugin/cmd/nomad-device-gputide
	$(GO) build -o $(BIN)/plugins/ ./autoscaler-plugin/cmd/...

## test: every unit, property and integration test (e2e tests skip without NOMAD_BIN, fail without it under CI).
## The e2e package runs after the others, not beside them: its real agents keep
## wall-clock deadlines that CPU-bound replays on the same cores would stretch.
test:
	$(GO) vet $(PKGS)
	@unit="$$($(GO) list $(PKGS) | grep -v '/e2e$$')"; if [ -n "$$unit" ]; then \
		echo "$(GO) test -count=1 -timeout 45m <every package but e2e>"; $(GO) test -count=1 -timeout 45m $$unit; fi
	@e2e="$$($(GO) list $(PKGS) | grep '/e2e$$')"; if [ -n "$$e2e" ]; then \
		echo "$(GO) test -count=1 -timeout 45m $$e2e"; $(GO) test -count=1 -timeout 45m $$e2e; fi

## demo: the simulator on the reference scenario (no Nomad, Consul or GPU needed)
demo:
	$(GO) run ./quota-broker/cmd/gputide sim -days 2 -out out/demo

## local: the whole stack on this machine (Consul, Nomad with 8 mock GPUs, the broker, the Autoscaler), loopback only; ACL=1 turns Nomad's ACLs on (examples/local/up.sh -acl)
local: build
	examples/local/up.sh $(if $(ACL),-acl)

## local-down: stop the local stack and remove its state (examples/local/down.sh)
local-down:
	examples/local/down.sh

## lint: gofmt, go vet and staticcheck
lint:
	@test -z "$$(gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$'))" || { gofmt -l $$(git ls-files '*.go' | grep -v '\.pb\.go$$'); exit 1; }
	$(GO) vet $(PKGS)
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 $(PKGS)

## e2e: tests against a real Nomad agent (NOMAD_BIN or nomad on PATH)
e2e:
	$(GO) test -count=1 -timeout 30m -v ./e2e/...

## bench: the go test benchmarks whose numbers are in docs/benchmarks.md
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./quota-broker/... ./device-plugin/... ./autoscaler-plugin/...

# Go minimizes each new interesting input for up to 60 s by default; on the
# snapshot targets, whose seeds are kilobytes of JSON, that takes the whole
# run (0 execs/s after the first few): bound it.
FUZZFLAGS ?= -fuzzminimizetime 1s

## fuzz: a short run of every fuzz target
fuzz:
	$(GO) test -run '^$$' -fuzz FuzzDecode -fuzztime 30s $(FUZZFLAGS) ./quota-broker/snapshot
	$(GO) test -run '^$$' -fuzz '^FuzzPlan$$' -fuzztime 30s $(FUZZFLAGS) ./quota-broker/plan
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 30s ./quota-broker/quota
	$(GO) test -run '^$$' -fuzz FuzzParse -fuzztime 30s ./quota-broker/schedule
	$(GO) test -run '^$$' -fuzz FuzzParseQuery -fuzztime 30s ./autoscaler-plugin/apmplugin
	$(GO) test -run '^$$' -fuzz FuzzPreviewInput -fuzztime 30s ./quota-broker/scalingpolicy

## fuzz-ci: the whole planner (snapshot bytes -> Unmarshal -> Compute) for 60 s; .ci/run runs it after make test
fuzz-ci:
	$(GO) test -run '^$$' -fuzz '^FuzzPlan$$' -fuzztime 60s $(FUZZFLAGS) ./quota-broker/plan

clean:
	rm -rf $(BIN) out
