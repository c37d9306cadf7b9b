#!/usr/bin/env bash
# make bench-scale: does splitting a load over more generators raise what they can send? One single-member
# docker cluster; the same closed-loop load (serializable single-key reads, cheap for etcd and dear for the
# client: the generator is the bottleneck) from 1, 2 and 4 worker containers limited to WORKER_CPUS (0.5)
# CPUs each, 16 clients per worker (`chaosbench run --cluster docker --workers N --worker-containers`).
# Prints, per worker count, the merged run's requests per second, each worker's share, its CPU, and the
# scaling against one worker, read from the merged summary.json; exits 1 when a run fails or a figure is
# missing. Docker must be running. DURATION (20s), WORKERS ("1 2 4") and WORKER_CPUS override the defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
duration=${DURATION:-20s}
workers=${WORKERS:-1 2 4}
cpus=${WORKER_CPUS:-0.5}
mkdir -p bin
CGO_ENABLED=0 go build -o bin/chaosbench ./cmd/chaosbench
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

dirs=()
for n in $workers; do
  out="$work/w$n"
  echo "== $n worker container(s), $cpus CPUs each"
  bin/chaosbench run --cluster docker --members 1 --workers "$n" --worker-containers --worker-cpus "$cpus" \
    --workload range --consistency s --rate 0 --clients $((16 * n)) --conns $((2 * n)) --key-space-size 10000 \
    --duration "$duration" --warmup 3s --faults none --check=false --progress none --out "$out" >"$work/w$n.log" 2>&1 || {
    tail -40 "$work/w$n.log"; exit 1; }
  dirs+=("$out")
done

python3 - "${dirs[@]}" <<'PY'
import json, os, sys

rows = []
for d in sys.argv[1:]:
    with open(os.path.join(d, "summary.json")) as f:
        s = json.load(f)
    split = s.get("split") or {}
    members = split.get("members") or []
    total = (s.get("total") or {}).get("throughput")
    if not members or total is None:
        sys.exit(f"bench-scale: {d}: the merged summary has no split members or no throughput")
    per = []
    for m in members:
        g = m.get("generator_load") or {}
        if m.get("throughput") is None or g.get("cores") is None:
            sys.exit(f"bench-scale: {d}: worker {m.get('worker')} has no throughput or generator load")
        per.append((m["throughput"], g["cores"]))
    rows.append((len(members), total, per))

base = rows[0][1]
print(f"{'workers':>7}  {'total req/s':>11}  {'vs 1':>5}  per worker (req/s @ cores)")
for n, total, per in rows:
    each = ", ".join(f"{t:,.0f} @ {c:.2f}" for t, c in per)
    print(f"{n:>7}  {total:>11,.0f}  {total / base:>4.2f}x  {each}")
PY
