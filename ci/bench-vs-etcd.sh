#!/usr/bin/env bash
# make bench-vs-etcd: etcd's own benchmark tool and chaosbench, one after the other, against the same
# single-member embedded cluster, with the same load: closed loop, 100 clients over 10 connections, puts of
# 256-byte values to a 10000-key space with 8-byte keys. chaosbench records everything it always records
# (HDR histograms, interval log, and the full request history for the consistency checker).
# Rounds alternate (etcd, chaosbench, etcd, chaosbench, ...) and the key space is compacted and the database
# defragmented before every run, so that both tools face the same database. The two runs of a round are
# seconds apart and share the machine's conditions, so the verdict rests on the per-round ratios
# chaosbench/etcd: their mean with a 95% confidence interval. On a 2-core machine that runs etcd too, a
# single round's ratio varies by about +-6%, so many short rounds beat a few long ones. Exits 1 if
# chaosbench is slower: the whole interval below 1. The client CPU each tool spent per request is printed
# too.
# The member's data directory is on tmpfs (/dev/shm) when there is one: on disk, fsync jitter moves
# throughput by +-10% from one round to the next and hides what the comparison is about, the cost of the
# tools themselves. Set BENCH_DIR to put it elsewhere.
set -euo pipefail
cd "$(dirname "$0")/.."
total=${TOTAL:-50000}
rounds=${ROUNDS:-15}

# Link etcd's benchmark against the etcd client chaosbench uses (see ci/etcd-tool.sh).
client=$(go list -m -f '{{.Version}}' go.etcd.io/etcd/client/v3)
bench=$(ETCD_CLIENT=$client ci/etcd-tool.sh benchmark)
etcdctl=$(ci/etcd-tool.sh etcdctl)
mkdir -p bin
go build -o bin/chaosbench ./cmd/chaosbench

base=${BENCH_DIR:-}
if [ -z "$base" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then base=/dev/shm; fi
work=$(mktemp -d ${base:+-p "$base"})
cluster_pid=
cleanup() {
  if [ -n "$cluster_pid" ]; then kill -INT "$cluster_pid" 2>/dev/null || true; wait "$cluster_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

bin/chaosbench cluster --members 1 --out "$work/cluster" >"$work/cluster.log" 2>&1 &
cluster_pid=$!
for _ in $(seq 600); do
  [ -s "$work/cluster/endpoints" ] && break
  kill -0 "$cluster_pid" 2>/dev/null || { cat "$work/cluster.log"; exit 1; }
  sleep 0.1
done
ep=$(head -n1 "$work/cluster/endpoints")
echo "single-member cluster at $ep; $total puts per round, $rounds rounds each"

# reset compacts everything written so far and defragments, so that every round starts from the same state.
reset() {
  local rev
  rev=$("$etcdctl" --endpoints "$ep" endpoint status -w json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["Status"]["header"]["revision"])')
  "$etcdctl" --endpoints "$ep" compact "$rev" --physical >/dev/null 2>&1 || true
  "$etcdctl" --endpoints "$ep" defrag >/dev/null
}

# cpu runs a command and prints "<its stdout> <user+sys CPU seconds>".
cpu() {
  local t out
  t=$(mktemp)
  out=$( { /usr/bin/time -f '%U %S' -o "$t" "$@"; } )
  echo "$out $(awk '{print $1 + $2}' "$t")"
  rm -f "$t"
}

rows=()
for round in $(seq "$rounds"); do
  reset
  read -r etcd_rps etcd_cpu < <(cpu sh -c "'$bench' --endpoints '$ep' --conns 10 --clients 100 put --total '$total' \
      --key-size 8 --val-size 256 --key-space-size 10000 2>/dev/null | awk '/Requests\\/sec/ {print \$2}'")
  reset
  read -r cb_cpu < <(cpu sh -c "bin/chaosbench run --cluster external --endpoints '$ep' --workload put --rate 0 \
      --clients 100 --conns 10 --total '$total' --duration 0 --key-size 8 --key-prefix '' --val-size 256 \
      --key-space-size 10000 --progress none --out '$work/run$round' >/dev/null")
  cb_rps=$(python3 -c "import json,sys; print(round(json.load(open(sys.argv[1]))['total']['throughput'], 1))" "$work/run$round/summary.json")
  printf 'round %d: etcd benchmark %8.1f puts/s (%.1f us CPU/put)   chaosbench %8.1f puts/s (%.1f us CPU/put)\n' \
      "$round" "$etcd_rps" "$(python3 -c "print($etcd_cpu * 1e6 / $total)")" "$cb_rps" "$(python3 -c "print($cb_cpu * 1e6 / $total)")"
  rows+=("$etcd_rps,$etcd_cpu,$cb_rps,$cb_cpu")
done
python3 - "$total" "${rows[@]}" <<'PY'
import statistics, sys
total = int(sys.argv[1])
rows = [tuple(map(float, r.split(","))) for r in sys.argv[2:]]
ratios = [c / e for e, _, c, _ in rows]
mean = statistics.mean(ratios)
# 95% interval of the mean ratio (Student's t, two-sided).
t = {2: 12.71, 3: 4.30, 4: 3.18, 5: 2.78, 6: 2.57, 7: 2.45, 8: 2.36, 9: 2.31, 10: 2.26, 11: 2.23,
     12: 2.20, 13: 2.18, 14: 2.16, 15: 2.14, 16: 2.13, 20: 2.09, 30: 2.05}.get(len(ratios), 2.0)
half = t * statistics.stdev(ratios) / len(ratios) ** 0.5 if len(ratios) > 1 else float("inf")
me = statistics.median(r[0] for r in rows)
mc = statistics.median(r[2] for r in rows)
ce = statistics.median(r[1] for r in rows) * 1e6 / total
cc = statistics.median(r[3] for r in rows) * 1e6 / total
print(f"median throughput: etcd benchmark {me:.0f} puts/s, chaosbench {mc:.0f} puts/s")
print(f"median client CPU per put: etcd benchmark {ce:.1f} us, chaosbench {cc:.1f} us (chaosbench's includes its start-up and result files)")
print(f"ratio chaosbench/etcd: mean {mean:.3f}, 95% interval [{mean - half:.3f}, {mean + half:.3f}] over {len(ratios)} rounds")
if mean + half < 1:
    print("FAIL: chaosbench is slower than etcd's benchmark")
    sys.exit(1)
if mean >= 1:
    print("PASS: chaosbench, recording everything, is at least as fast as etcd's benchmark")
else:
    print("PASS: no measurable difference: chaosbench, recording everything, keeps up with etcd's benchmark")
PY
