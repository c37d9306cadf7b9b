#!/usr/bin/env bash
# make bench-verdict: how long users wait for a verdict (issue 41). Prints three figures, each measured on
# this machine with the wall clock around real chaosbench commands:
#
# 1. compare: time to verdict of `--rounds auto` against `--rounds 6`, for A/A (two variants of the same
#    configuration: etcd's defaults, and heartbeat-interval=100, which is the default) and for A against a
#    slow disk (the same configuration with every fsync of the member's disk delayed DELAY by a slowfs FUSE
#    mount under its data directory). The gate is put:p50 with --min-effect MIN_EFFECT percent. Per repeat it
#    prints each comparison's rounds, seconds and gated verdict; at the end, the median seconds and how many
#    repeats gave the expected verdict (A/A: no difference; slow disk: worse). Target: the same verdicts in
#    at least 9 of 10 repeats, auto faster.
# 2. qualify: `qualify --class small` (3 members, the data under the qualification's directory) with
#    --early-stop=false and with --early-stop: seconds to the verdict, the step's measured seconds, and
#    why it ended early (STEP, MIN_STEP).
# 3. kube: a kube run of KUBE_DURATION (default 30m; 2m to try it) with the checks main has: seconds from
#    the load's end (summary.json's time_base plus measured_s: when the generator stopped) to its verdict
#    line, each output line stamped as it arrives with bash's $EPOCHREALTIME (a `date` per line, forked
#    while the run prints its tables, added a minute on a busy machine). Target: under 10 s.
#
# REPEATS (10), DURATION (each compare run, 4s), RATE (150), DELAY (10ms), MIN_EFFECT (25), STEP (3m),
# MIN_STEP (30s), KUBE_DURATION (30m), SEED (4100: repeat N's comparisons use SEED+N) and PARTS
# (compare,qualify,kube) override the defaults. Exit 1 when a
# figure could not be measured; the figures are not judged here (a busy machine distorts them: the load
# average is printed with them).
set -euo pipefail
cd "$(dirname "$0")/.."
repeats=${REPEATS:-10}
duration=${DURATION:-4s}
rate=${RATE:-150}
delay=${DELAY:-10ms}
min_effect=${MIN_EFFECT:-25}
step=${STEP:-3m}
min_step=${MIN_STEP:-30s}
kube_duration=${KUBE_DURATION:-30m}
parts=${PARTS:-compare,qualify,kube}
seed=${SEED:-4100}
mkdir -p bin
CGO_ENABLED=0 go build -o bin/chaosbench ./cmd/chaosbench
bin=$PWD/bin/chaosbench

work=$(mktemp -d)
slowfs_pid=
cleanup() {
  exec 9>&- 2>/dev/null || true
  if [ -n "$slowfs_pid" ]; then kill "$slowfs_pid" 2>/dev/null || true; wait "$slowfs_pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
failed=0
now() { echo "$EPOCHREALTIME"; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }
median() { sort -n | awk '{ v[NR] = $1 } END { if (NR == 0) { print "-" } else if (NR % 2) { print v[(NR + 1) / 2] } else { printf "%.1f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2 } }'; }

# gated prints the gated figure's verdict and the rounds of a comparison from its compare.json.
gated() {
  python3 - "$1" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
verdict = "-"
for v in c["effects"]["variants"]:
    for e in v["effects"]:
        if e["metric"]["id"] == "put:p50":
            verdict = e["verdict"]
print(len(c.get("rounds", [])), verdict.replace(" ", "-"))
EOF
}

if [[ $parts == *compare* ]]; then
  # The slow disk: one slowfs mount, every fsync delayed; each slow run's member data on it.
  mkdir -p "$work/lower" "$work/mnt"
  mkfifo "$work/slowfs.in"
  "$bin" slowfs --lower "$work/lower" --mount "$work/mnt" <"$work/slowfs.in" >"$work/slowfs.out" 2>"$work/slowfs.err" &
  slowfs_pid=$!
  exec 9>"$work/slowfs.in"
  for _ in $(seq 100); do grep -q ready "$work/slowfs.out" 2>/dev/null && break; sleep 0.1; done
  if ! grep -q ready "$work/slowfs.out"; then echo "slowfs did not mount: $(cat "$work/slowfs.out" "$work/slowfs.err")"; exit 1; fi
  ns=$(python3 -c "import sys; v=sys.argv[1]; print(int(float(v[:-2])*1e6) if v.endswith('ms') else int(float(v[:-1])*1e9))" "$delay")
  echo "{\"op\":\"set\",\"delays\":{\"fsync_ns\":$ns}}" >&9
  echo "compare: put, $rate/s, 4 clients, $duration per run, one member; gate put:p50, --min-effect $min_effect%; slow disk: fsync +$delay (slowfs)"
  printf '%-6s %-9s %-9s %7s %8s %-14s\n' repeat pair --rounds rounds seconds verdict
  declare -A times ok
  for rep in $(seq "$repeats"); do
    for pair in aa slow; do
      for mode in auto 6; do
        out="$work/cmp-$rep-$pair-$mode"
        if [ "$pair" = slow ]; then
          # compare's layout: the second variant's rounds are 02-<label>/round-N; their member data go on
          # the slow disk, as qualify --data-root lays it out.
          for r in $(seq 10); do
            mkdir -p "$out/02-builtin_heartbeat-interval=100/round-$r" "$work/mnt/$rep-$mode-$r"
            ln -s "$work/mnt/$rep-$mode-$r" "$out/02-builtin_heartbeat-interval=100/round-$r/members"
          done
        fi
        t0=$(now)
        "$bin" compare --workload put --rate "$rate" --clients 4 --conns 1 --duration "$duration" --warmup 1s \
          --faults none --members 1 --check=false --history=false --progress none \
          --etcd-flag-set "" --etcd-flag-set "heartbeat-interval=100" --seed "$((seed + rep))" --rounds "$mode" \
          --fail-on-regression=put:p50 --min-effect "$min_effect" --out "$out" >"$out.log" 2>&1 || true
        t=$(secs "$t0" "$(now)")
        if [ ! -s "$out/compare.json" ]; then tail -5 "$out.log"; failed=1; continue; fi
        read -r rounds verdict < <(gated "$out/compare.json")
        printf '%-6s %-9s %-9s %7s %8s %-14s\n' "$rep" "$pair" "$mode" "$rounds" "$t" "$verdict"
        times[$pair-$mode]+="$t "
        want=no-difference; [ "$pair" = slow ] && want=worse
        [ "$verdict" = "$want" ] && ok[$pair-$mode]=$(( ${ok[$pair-$mode]:-0} + 1 ))
        rm -rf "$out" "$work/mnt/$rep-$mode-"*
      done
    done
  done
  for pair in aa slow; do
    want="no difference"; [ "$pair" = slow ] && want=worse
    for mode in auto 6; do
      m=$(printf '%s\n' ${times[$pair-$mode]:-} | median)
      echo "compare $pair --rounds $mode: median ${m} s to the verdict; '$want' in ${ok[$pair-$mode]:-0} of $repeats repeats"
    done
  done
  exec 9>&-
  wait "$slowfs_pid" 2>/dev/null || true
  slowfs_pid=
fi

if [[ $parts == *qualify* ]]; then
  for mode in full early; do
    extra=(--early-stop=false)
    [ "$mode" = early ] && extra=(--early-stop --min-step "$min_step")
    out="$work/qualify-$mode"
    t0=$(now)
    code=0
    "$bin" qualify --class small --step-duration "$step" --warmup 10s --progress none --out "$out" "${extra[@]}" >"$out.log" 2>&1 || code=$?
    t=$(secs "$t0" "$(now)")
    if [ ! -s "$out/qualification.json" ]; then tail -5 "$out.log"; failed=1; continue; fi
    python3 - "$out/qualification.json" "$mode" "$t" "$code" <<'EOF'
import json, sys
q = json.load(open(sys.argv[1]))
st = q["steps"][0] if q.get("steps") else {}
early = st.get("early_stop") or {}
print("qualify small %-5s: %s s to the verdict (exit %s), step measured %s s, verdict %s%s" % (
    sys.argv[2], sys.argv[3], sys.argv[4], st.get("measured_s", "-"), st.get("verdict", "-"),
    ("; ended early: " + early.get("why", "")) if early else ""))
EOF
  done
fi

if [[ $parts == *kube* ]]; then
  out="$work/kube"
  echo "kube: --preset small, $kube_duration, faults none, the history checked (whatever checker this build has)"
  "$bin" run --workload kube --preset small --duration "$kube_duration" --faults none --progress lines \
    --out "$out" 2>&1 | while IFS= read -r line; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done >"$work/kube.log" || true
  python3 - "$work/kube.log" "$out/summary.json" <<'EOF' || failed=1
import datetime, json, sys
verdict = None
for line in open(sys.argv[1]):
    t, _, text = line.partition(" ")
    if text.startswith("verdict:"):
        verdict = float(t)
try:
    s = json.load(open(sys.argv[2]))
    base = datetime.datetime.fromisoformat(s["time_base"].replace("Z", "+00:00"))
    end = base.timestamp() + s["measured_s"]
except (OSError, KeyError, ValueError) as e:
    print("kube: no load end in the run's summary.json: %s" % e)
    sys.exit(1)
if verdict is None:
    print("kube: no verdict line in the run's output")
    sys.exit(1)
print("kube: %.1f s from the load's end to the verdict (the checks after the load: %.1f s of it; %s operations)" % (
    verdict - end, s.get("check_after_load_seconds", 0), s.get("total", {}).get("count", "?")))
EOF
fi
echo "machine after: load average $(cut -d' ' -f1-3 /proc/loadavg)"
exit "$failed"
