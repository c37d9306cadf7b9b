#!/usr/bin/env bash
# make bench-vs-etcd: etcd's own benchmark tool and chaosbench, one after the other, against the same
# single-member embedded cluster, with the same load: closed loop, 100 clients over 10 connections, puts of
# 256-byte values to a 10000-key space with 8-byte keys. chaosbench records everything it records during
# any load (HDR histograms, interval log, and the full request history for the consistency checker); its
# consistency check (after the load) and its scraping of etcd's /metrics (which etcd's tool does not do,
# and which costs the shared member CPU) are off. The requests on the wire are the same gRPC requests; etcd's
# tool sends them with etcd's client (grpc-go), chaosbench over HTTP/2 connections of its own
# (workloads/unary.go), which is where most of the difference in client CPU comes from.
# The order alternates: odd rounds run etcd's tool first, even rounds chaosbench first (AB, BA, AB, ...),
# so that neither tool always inherits the other's aftermath; each round's line says which went first, and
# the mean ratio of each order is printed. The key space is compacted and the database defragmented before
# every run, so that both tools face the same database. The two runs of a round are seconds apart and share
# the machine's conditions, so the figures to read are the per-round ratios chaosbench/etcd (printed per
# round, with their median, per order too). On a 2-core machine that runs etcd too, a single round's ratio
# varies by about +-6%, so many short rounds beat a few long ones. The figures are informational: nothing
# here computes statistics or a verdict on them (ci/judge.sh only reads). Exits 1 when a tool fails, when a
# figure is missing or not a number (the line names it), and with the run's own exit code when a chaosbench
# run's outcome is not a pass (a run that did not pass measured nothing comparable).
# Client CPU per put is printed for what each figure includes: etcd's tool as a whole process (the load,
# its start-up and its final report: nothing else can be measured from outside it); chaosbench over the
# load alone (summary.json generator_load: from the first request to the last, recording included), and
# as a whole process (also its start-up and the writing of its summary, histograms and reports).
# The member's data directory is on tmpfs (/dev/shm) when there is one: on disk, fsync jitter moves
# throughput by +-10% from one round to the next and hides what the comparison is about, the cost of the
# tools themselves. Set BENCH_DIR to put it elsewhere. TOTAL and ROUNDS override 50000 puts and 15 rounds.
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
member_pid=$(pgrep -P "$cluster_pid" | head -n1 || true)
echo "single-member cluster at $ep; $total puts per run, $rounds rounds; odd rounds run etcd's benchmark first, even rounds chaosbench first"

# reset compacts everything written so far and defragments, so that every round starts from the same state.
reset() {
  local rev
  rev=$("$etcdctl" --endpoints "$ep" endpoint status -w json | python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["Status"]["header"]["revision"])')
  "$etcdctl" --endpoints "$ep" compact "$rev" --physical >/dev/null 2>&1 || true
  "$etcdctl" --endpoints "$ep" defrag >/dev/null
}

# timed NAME CMD...: runs CMD with its output in NAME.out and NAME.err, and its user and system CPU seconds
# in NAME.cpu (bash's own time: the process and its children, nothing else).
timed() {
  local name=$1 TIMEFORMAT='%3U %3S'
  shift
  { time "$@" >"$name.out" 2>"$name.err"; } 2>"$name.cpu"
}

# member_timed NAME CMD...: timed, and the member's CPU ticks and the wall clock before and after in
# NAME.member, so that each round can say how much CPU the member spent per put and how many of the
# machine's cores the two processes kept busy together (all of them: CPU sets the pace; fewer: something
# else does, such as the member's raft and disk pipeline).
ticks() { [ -n "$member_pid" ] && sed 's/.*) //' "/proc/$member_pid/stat" | awk '{print $12 + $13}'; }
member_timed() {
  local name=$1 t0 w0 rc=0
  t0=$(ticks || true) w0=$(date +%s.%N)
  timed "$@" || rc=$?
  echo "${t0:-?} $(ticks || echo '?') $w0 $(date +%s.%N)" >"$name.member"
  return "$rc"
}

# member_line ROUND: the round's member CPU per put and cores kept busy, for each tool (informational).
member_line() {
  local hz
  hz=$(getconf CLK_TCK)
  for tool in etcd cb; do
    read -r t0 t1 w0 w1 <"$work/$tool$1.member"
    read -r user sys <"$work/$tool$1.cpu"
    awk -v t0="$t0" -v t1="$t1" -v w0="$w0" -v w1="$w1" -v u="$user" -v s="$sys" -v hz="$hz" -v n="$total" \
        -v cores="$(nproc)" -v rows="$work/member.rows" -v tool="$tool" \
        'BEGIN { name = tool == "etcd" ? "etcd'"'"'s benchmark" : "chaosbench"
                 if (t0 == "?" || t1 == "?") { printf "  %s: member CPU not readable\n", name; exit }
                 per = (t1 - t0) / hz / n * 1e6; busy = ((t1 - t0) / hz + u + s) / (w1 - w0)
                 printf "  %s: member %.1f us CPU per put; member and tool kept %.2f of %d cores busy\n", name, per, busy, cores
                 printf "%s %.1f %.2f\n", tool, per, busy >>rows }'
  done
}

# member_medians: the medians over every round of member_line's figures, per tool.
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR) printf "%s", (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
member_medians() {
  [ -s "$work/member.rows" ] || return 0
  echo "median member CPU per put and cores kept busy (the member spends most of the CPU):"
  for tool in etcd cb; do
    printf '  %-16s member %s us CPU per put, %s cores busy\n' "$([ "$tool" = etcd ] && echo "etcd benchmark:" || echo chaosbench:)" \
      "$(awk -v t="$tool" '$1 == t { print $2 }' "$work/member.rows" | median)" \
      "$(awk -v t="$tool" '$1 == t { print $3 }' "$work/member.rows" | median)"
  done
}

# etcd_run ROUND and chaosbench_run ROUND run one tool's part of a round, each from a reset database.
etcd_run() {
  reset
  member_timed "$work/etcd$1" "$bench" --endpoints "$ep" --conns 10 --clients 100 put --total "$total" \
      --key-size 8 --val-size 256 --key-space-size 10000 || {
    echo "FAIL: round $1: etcd's benchmark failed:"; cat "$work/etcd$1.err"; exit 1; }
}
chaosbench_run() {
  reset
  local rc=0
  member_timed "$work/cb$1" bin/chaosbench run --cluster external --endpoints "$ep" --workload put --rate 0 \
      --clients 100 --conns 10 --total "$total" --duration 0 --key-size 8 --key-prefix '' --val-size 256 \
      --key-space-size 10000 --check=false --scrape-interval 0 --progress none --out "$work/run$1" || rc=$?
  # Its outcome is read from its summary.json by ci/judge.sh, with this exit code.
  echo "$rc" >"$work/cb$1.code"
  if [ "$rc" -ne 0 ]; then cat "$work/cb$1.out" "$work/cb$1.err"; fi
}

: >"$work/rounds.csv"
for round in $(seq "$rounds"); do
  if [ $((round % 2)) -eq 1 ]; then
    order=etcd-first
    etcd_run "$round"
    chaosbench_run "$round"
  else
    order=chaosbench-first
    chaosbench_run "$round"
    etcd_run "$round"
  fi
  ci/judge.sh vs-etcd-round "$work/rounds.csv" "$round" "$order" "$total" "$work/etcd$round.out" \
      "$work/etcd$round.cpu" "$work/run$round/summary.json" "$work/cb$round.cpu" "$(cat "$work/cb$round.code")"
  member_line "$round"
done
member_medians
ci/judge.sh vs-etcd "$work/rounds.csv"
