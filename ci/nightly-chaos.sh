#!/usr/bin/env bash
# The nightly chaos job: runs every scenario in ci/chaos/ (or those given as arguments) and fails unless
# every run is green. chaosbench decides each run (its summary.json "outcome", and its exit code);
# ci/judge.sh only reads that outcome, never decides again: green when it is ok, or known issues only
# (named with their evidence), and the exit code agrees with it. A run without summary.json, or whose
# outcome is missing or not one chaosbench writes, or whose exit code contradicts it, is red: what cannot be
# read is never a pass. One line per scenario gives the verdict, the seed, the outcome and every reason.
# Every run keeps its directory under $OUT (default results/nightly-<date>) with summary.json and
# faults.jsonl, and its seed, which `chaosbench run --config FILE --seed SEED` uses to replay the night's
# schedule. CHAOSBENCH names a chaosbench binary to use instead of building one; CHAOSBENCH_ARGS adds flags
# to every run.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-results/nightly-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p "$out" || exit 1
chaosbench=${CHAOSBENCH:-}
if [ -z "$chaosbench" ]; then
	chaosbench=bin/chaosbench
	mkdir -p bin && go build -o "$chaosbench" ./cmd/chaosbench || exit 1
fi

scenarios=("$@")
if [ ${#scenarios[@]} -eq 0 ]; then
	scenarios=(ci/chaos/*.yaml)
fi

red=0
summary=()
for scenario in "${scenarios[@]}"; do
	name=$(basename "$scenario" .yaml)
	dir="$out/$name"
	echo "=== $name ($scenario)"
	# shellcheck disable=SC2086 # CHAOSBENCH_ARGS is a list of flags
	"$chaosbench" run --config "$scenario" --out "$dir" --progress lines ${CHAOSBENCH_ARGS:-}
	code=$?
	line=$(ci/judge.sh run "$name" "$dir/summary.json" "$code")
	judged=$?
	# Green needs both the judge's exit code and its word: a judge that broke is not a pass.
	if [ $judged -ne 0 ] || [ "${line%% *}" != green ]; then
		red=1
		if [ "${line%% *}" != red ]; then
			line=$(printf '%-6s %-28s seed %-20s %s' red "$name" unknown "cannot judge (ci/judge.sh exit code $judged, exit code $code): $line")
		fi
	fi
	echo "$line"
	summary+=("$line")
done

echo
echo "=== nightly chaos: results in $out"
printf '%s\n' "${summary[@]}"
if [ $red -ne 0 ]; then
	echo "FAIL: not every run is green"
	exit 1
fi
echo "PASS: every run is green"
