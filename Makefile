# etcd-chaosbench. `make test` is what CI runs (.ci/run) and what the README tells a new user to run.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.chaosbenchVersion=$(VERSION)
ARGS    ?=

.PHONY: all build test test-race lint bench bench-vs-etcd bench-checker soak-checker test-versions run clean

all: build

## build: the chaosbench binary, in bin/. Static (no cgo), so that it also runs FROM scratch as the
## builtin etcd image of docker clusters.
build:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o bin/chaosbench ./cmd/chaosbench

## test: lint, then every test but the long ones, which skip saying "runs in make test-long" (about 14.5
## minutes on 2 cores). The light packages (LIGHT_PACKAGES: no timing assertion, no browser, no container,
## and at most one small process of their own whose answers they judge, not its speed: the shapes proxy's
## etcd, a kube-apiserver that cannot become ready) run two at a time; then the others one at a time: their integration tests start real etcd clusters,
## and on a 2-core machine two packages' clusters would distort each other's timing assertions (a new
## package runs there unless it is added to LIGHT_PACKAGES); both groups run, and either failing fails
## make test. Inside a package, the tests that judge no latency (outcomes, exit codes, files) call
## t.Parallel and run three at a time (-parallel 3) once the package's timing tests have run alone. go vet ran in lint, so go test does not run it again. A test whose tool (FUSE, Docker, fio,
## Chromium, ...) is missing skips, saying why; with CHAOSBENCH_REQUIRE=all, as .ci/run sets it, it fails
## instead (internal/testenv).
LIGHT_PACKAGES := ./ci ./clusters/controlplane ./clusters/kubebuild ./clusters/shapes ./cmd/kubesim ./internal/testenv \
	./outcome ./results ./results/compare ./results/history ./results/merge ./results/trend
test: lint
	CHAOSBENCH_LONG= $(GO) test -p 2 -vet=off -count=1 -timeout 20m $(LIGHT_PACKAGES); light=$$?; \
	CHAOSBENCH_LONG= $(GO) test -p 1 -parallel 3 -vet=off -count=1 -timeout 40m $$($(GO) list ./... | grep -vxF "$$($(GO) list $(LIGHT_PACKAGES))"); \
	heavy=$$?; [ $$light = 0 ] && [ $$heavy = 0 ]

## test-long: the long tests only (testenv.Long: the tests named TestLongSomething, which make test skips):
## the soak-like runs, the container upgrades and downgrades across releases, the comparison with etcdctl
## check perf, the real control plane. CI runs it after make test, with the same CHAOSBENCH_REQUIRE, so
## every promise is still checked on every CI run.
.PHONY: test-long
test-long: lint
	CHAOSBENCH_LONG=1 $(GO) test -p 1 -vet=off -count=1 -timeout 40m -run '^TestLong[A-Z]' ./...

## The tests build chaosbench static, as make build does (cmd/chaosbench's TestMain, the builtin image of
## docker clusters): compiled static too, the tests share that one build of every dependency instead of
## compiling them all twice, with and without cgo (minutes on 2 cores from a fresh clone).
lint test test-long: export CGO_ENABLED := 0

## test-race: every test under the race detector (timing assertions skip themselves there).
test-race:
	$(GO) test -race -count=1 -timeout 40m ./...

## lint: gofmt and go vet must be clean.
lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

## bench: the Go benchmarks (recording overhead, encoders, collector), with allocations.
bench:
	$(GO) test -run '^$$' -bench . -benchmem -count 1 ./...

## bench-vs-etcd: etcd's own benchmark tool and chaosbench against one single-member cluster, in alternating
## order; prints their figures (informational, not judged); fails when a tool fails or a figure is missing.
bench-vs-etcd:
	ci/bench-vs-etcd.sh

## bench-kube: requests per second the kube workload's generator issues per core with the large preset,
## pinned to one CPU while etcd runs on the others; fails if it cannot sustain the preset on that core, or
## if a figure it prints or judges is missing from the run's summary.json.
.PHONY: bench-kube
bench-kube:
	ci/bench-kube.sh

## bench-verdict: time to the verdict (issue 41): compare A/A and A/slow-disk with --rounds auto against
## --rounds 6 (REPEATS, default 10), qualify small with and without --early-stop, and a kube run's seconds
## from the load's end to its verdict (KUBE_DURATION, default 30m); PARTS=compare,qualify,kube picks parts.
.PHONY: bench-verdict
bench-verdict:
	ci/bench-verdict.sh

## bench-scale: one load split over 1, 2 and 4 worker containers of half a CPU each against one docker
## cluster; prints the achieved total rate against the number of workers (needs Docker).
.PHONY: bench-scale
bench-scale:
	ci/bench-scale.sh

## test-versions: every supported etcd line (3.4.13, 3.5, 3.6, 3.7), alone and mixed, on embed and docker.
test-versions: build
	ci/etcd-versions.sh bin/chaosbench

## chaos-nightly: the nightly chaos job (ci/chaos/*.yaml, about 30 minutes); fails unless every run's
## summary.json says ok or known-issue and its exit code agrees (ci/judge.sh run reads it, never decides).
.PHONY: chaos-nightly
chaos-nightly:
	ci/nightly-chaos.sh

## nightly-smoke: the smoke-tagged scenarios of ci/chaos/ as a suite (a few minutes): faults heal, the
## cluster recovers, the histories check clean; results in results/nightly-smoke-<time>.
.PHONY: nightly-smoke
nightly-smoke: build
	bin/chaosbench suite ci/chaos --tags smoke --out results/nightly-smoke-$$(date -u +%Y%m%d-%H%M%S) $(ARGS)

## regressions: the named regression scenarios of ci/chaos/regressions as a suite (fixed seeds; a few
## minutes, failpoint builds of etcd made on first use): every one must pass.
.PHONY: regressions
regressions: build
	bin/chaosbench suite ci/chaos/regressions --out results/regressions-$$(date -u +%Y%m%d-%H%M%S) $(ARGS)

## regressions-record: etcd's track record of correctness bugs (the scenarios of ci/chaos/regressions, and of
## ci/chaos/open whose bug a later release fixed, that name one: suite issue/affected/expect/fixed), each on the release that had the bug, where it must be
## caught with the finding it expects, then on the release that fixed it, where it must pass (tens of
## minutes; every release built from the Go module proxy on first use). The weekly CI job runs it.
.PHONY: regressions-record
regressions-record: build
	bin/chaosbench suite ci/chaos/regressions ci/chaos/open --affected --out results/regressions-affected-$$(date -u +%Y%m%d-%H%M%S) $(ARGS)
	bin/chaosbench suite ci/chaos/regressions ci/chaos/open --fixed --out results/regressions-fixed-$$(date -u +%Y%m%d-%H%M%S) $(ARGS)

## bench-checker: check the kube-shaped history of `kubesim -duration 35m -rate 500 -seed 7` (1,098,944
## operations and 2,022,192 watch events from a simulated etcd: linearizability/kubesim; writing it takes
## 20-30 s) and print the check's wall time, CPU, peak memory, operations and events (target: under
## 60 s and 2 GB on 2 cores). HISTORY=dir checks a recorded run directory instead; SIM_DURATION, SIM_RATE
## and SIM_SEED change the simulated run.
SIM_DURATION ?= 35m
SIM_RATE     ?= 500
SIM_SEED     ?= 7
bench-checker: build
	@dir="$(HISTORY)"; \
	if [ -z "$$dir" ]; then \
		dir=$$(mktemp -d); trap 'rm -rf "$$dir"' EXIT; \
		$(GO) run ./cmd/kubesim -out "$$dir" -duration $(SIM_DURATION) -rate $(SIM_RATE) -seed $(SIM_SEED) || exit 1; \
		ls -l "$$dir"; \
	fi; \
	echo "checking $$dir (target: under 60 s and 2 GB on 2 cores)"; \
	bin/chaosbench check "$$dir"

## soak-checker: the checker against real etcd under member kills, pauses, restarts and peer resets, and
## under one fault of every kind the faults package injects, RUNS times each (default 20); every run must
## check clean.
soak-checker:
	CHAOS_RUNS=$${RUNS:-20} CHAOSBENCH_LONG=1 $(GO) test -count=1 -timeout 90m -run 'TestTrafficUnderFaults|TestLongTrafficUnderEveryFault' -v ./linearizability | grep -E '^(---|ok|FAIL|PASS)|    ---'

## qualify-local: qualify this machine for etcd: the disk probe under results/, then an embedded 3-member
## cluster climbing the size classes from small, 30 s per step after 5 s of warm-up (a few minutes; etcd
## samples the peer round trip every 30 s, so shorter steps would not measure the network). Prints
## the verdict and the table; exits as qualify does (0 qualified for small, 3 not, 1 undecided).
.PHONY: qualify-local
qualify-local: build
	bin/chaosbench qualify --step-duration 30s --warmup 5s --out results/$$(date +%Y%m%d-%H%M%S)-qualify-local $(ARGS)

## fidelity: the kube workload against a real Kubernetes control plane (built from the module proxy and
## cached), at the small and medium presets, one after the other on fresh single-member clusters; writes
## fidelity.md, fidelity.html and fidelity.json under results/ (about 15 minutes; not part of make test).
.PHONY: fidelity
fidelity: build
	bin/chaosbench image kube
	bin/chaosbench fidelity --preset small --duration $${DURATION:-2m} --out results/fidelity-small-$$(date -u +%Y%m%d-%H%M%S) $(ARGS)
	bin/chaosbench fidelity --preset medium --duration $${DURATION:-2m} --out results/fidelity-medium-$$(date -u +%Y%m%d-%H%M%S) $(ARGS)

## figures: run the bench targets again (bench-vs-etcd, bench-kube, bench-scale, bench-checker and the
## recording benchmarks) and write each figure into docs/figures.md with the command, the commit and the
## machine that measured it (long, and Docker for bench-scale; not part of make test). FIGURES="bench-kube
## bench-checker" measures some.
.PHONY: figures
figures:
	ci/figures.sh

## run: build and run chaosbench with ARGS, e.g. make run ARGS="--workload put --duration 30s"
run: build
	bin/chaosbench run $(ARGS)

clean:
	rm -rf bin
