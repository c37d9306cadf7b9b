#!/usr/bin/env bash
# make bench-kube: how many requests per second the kube workload's generator issues per core, with etcd's
# CPU kept out of the count. A single-member cluster (`chaosbench cluster`, its data on tmpfs) runs on
# every CPU but the first; the generator (`chaosbench run --cluster external`) runs pinned to the first
# CPU alone, with the large preset (1000 nodes, 30000 pods, 3 apiservers), history recording on as in
# every run, and the consistency check off (it runs after the load and is not generation).
# Prints the generator's CPU time over the load, requests per CPU-second, cores used, live heap, peak memory
# and the schedule's missed slots, all read from the run's summary.json by ci/judge.sh kube. The generator
# sustains the preset on one core when, pinned to one CPU (it cannot use more), it started under 1% of its
# slots late: the run carries that bar as a threshold (missed<1%), so chaosbench decides it and the script
# exits with the run's outcome's code (3 when the bar is missed); 1 when a figure is missing or not a number
# (the line names it). Without taskset the generator is not pinned and the figures are not of one core.
# PRESET, DURATION and MEMBERS override the defaults (large, 60s, 1).
set -euo pipefail
cd "$(dirname "$0")/.."
preset=${PRESET:-large}
duration=${DURATION:-60s}
members=${MEMBERS:-1}
mkdir -p bin
CGO_ENABLED=0 go build -o bin/chaosbench ./cmd/chaosbench

base=${BENCH_DIR:-}
if [ -z "$base" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then base=/dev/shm; fi
work=$(mktemp -d ${base:+-p "$base"})
cluster_pid=
cleanup() {
  if [ -n "$cluster_pid" ]; then kill -INT "$cluster_pid" 2>/dev/null || true; wait "$cluster_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

cpus=$(nproc)
gen_pin=() cluster_pin=()
if command -v taskset >/dev/null && [ "$cpus" -ge 2 ]; then
  gen_pin=(taskset -c 0)
  cluster_pin=(taskset -c "1-$((cpus - 1))")
  echo "generator pinned to CPU 0, etcd to CPUs 1-$((cpus - 1))"
else
  echo "warning: cannot pin (taskset missing or one CPU): etcd and the generator share the CPUs"
fi

"${cluster_pin[@]}" bin/chaosbench cluster --members "$members" --out "$work/cluster" >"$work/cluster.log" 2>&1 &
cluster_pid=$!
for _ in $(seq 600); do
  [ -s "$work/cluster/endpoints" ] && break
  kill -0 "$cluster_pid" 2>/dev/null || { cat "$work/cluster.log"; exit 1; }
  sleep 0.1
done
eps=$(paste -sd, "$work/cluster/endpoints")

code=0
"${gen_pin[@]}" bin/chaosbench run --cluster external --endpoints "$eps" --preset "$preset" --duration "$duration" \
  --faults none --check=false --progress none --threshold 'missed<1%' --out "$work/run" >"$work/run.log" 2>&1 || code=$?
if [ ! -s "$work/run/summary.json" ]; then cat "$work/run.log"; fi
grep -E '^kube workload:|^total:|^schedule:|^operation mix:|^Kubernetes SLOs|^verdict:' "$work/run.log" | sort -u || true
ci/judge.sh kube "$preset" "$work/run/summary.json" "$code"
