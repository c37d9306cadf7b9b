#!/usr/bin/env bash
# The nightly chaos job: runs every scenario in ci/chaos/ (or those given as arguments) and fails when any
# verdict is red: a fault the cluster did not recover from (exit code 3), a consistency violation (4), a
# harness failure (1), or a check whose verdict is not "ok" (unknown is never a pass). Every run keeps its
# directory under $OUT (default results/nightly-<date>) with summary.json and faults.jsonl, and its seed,
# which `chaosbench run --config FILE --seed SEED` uses to replay the night's schedule.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-results/nightly-$(date -u +%Y%m%d-%H%M%S)}
mkdir -p bin "$out"
go build -o bin/chaosbench ./cmd/chaosbench || exit 1

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
	bin/chaosbench run --config "$scenario" --out "$dir" --progress lines ${CHAOSBENCH_ARGS:-}
	code=$?
	verdict=green
	reasons=()
	if [ $code -ne 0 ]; then
		verdict=red
		reasons+=("exit code $code")
	fi
	if [ -f "$dir/summary.json" ]; then
		not_recovered=$(jq '[.faults[]? | select(.outcome != "recovered")] | length' "$dir/summary.json")
		bad_checks=$(jq -r '[.checks[]? | select(.verdict != "ok") | "\(.name)=\(.verdict)"] | join(" ")' "$dir/summary.json")
		# Not through jq: seeds are 63-bit integers, and jq reads numbers as doubles.
		seed=$(sed -n 's/^  "seed": \([0-9]*\),$/\1/p' "$dir/summary.json")
		if [ "$not_recovered" != "0" ]; then
			verdict=red
			reasons+=("$not_recovered fault windows not recovered")
		fi
		if [ -n "$bad_checks" ]; then
			verdict=red
			reasons+=("checks: $bad_checks")
		fi
	else
		verdict=red
		seed=unknown
		reasons+=("no summary.json")
	fi
	[ "$verdict" = red ] && red=1
	summary+=("$(printf '%-6s %-28s seed %-20s %s' "$verdict" "$name" "$seed" "${reasons[*]:-}")")
done

echo
echo "=== nightly chaos: results in $out"
printf '%s\n' "${summary[@]}"
exit $red
