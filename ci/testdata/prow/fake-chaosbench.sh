#!/usr/bin/env bash
# A stand-in for chaosbench in the Prow job's test (ci/prow_test.go). Every call is appended to $FAKE_CALLS.
#   suite ... --out DIR: writes DIR/suite.json and DIR/junit.xml, prints "suite: $FAKE_SUITE_SAYS" and exits
#       $FAKE_SUITE_EXIT;
#   trend DIR... --out OUT ...: prints each night it was given (a DIR holding suite.json, or a subdirectory
#       of DIR that does), with every file under it and what its suite.json holds, and exits $FAKE_TREND_EXIT.
set -eu
cmd=$1
shift
echo "$cmd $*" >> "$FAKE_CALLS"
case $cmd in
suite)
	out=
	while [ $# -gt 0 ]; do
		if [ "$1" = --out ]; then out=$2; shift; fi
		shift
	done
	mkdir -p "$out"
	echo '{}' > "$out/suite.json"
	echo '<testsuites/>' > "$out/junit.xml"
	echo "suite: ${FAKE_SUITE_SAYS:-}"
	exit "${FAKE_SUITE_EXIT:-0}"
	;;
trend)
	dirs=()
	while [ $# -gt 0 ]; do
		case $1 in
		--out) shift ;;
		-*) ;;
		*) dirs+=("$1") ;;
		esac
		shift
	done
	for d in "${dirs[@]}"; do
		if [ -f "$d/suite.json" ]; then
			echo "trend night: tonight"
			continue
		fi
		for n in "$d"/*/; do
			[ -f "$n/suite.json" ] || continue
			echo "trend night: $(basename "$n"): $(cd "$n" && find . -type f | sed 's|^\./||' | sort | tr '\n' ' ')($(cat "$n/suite.json"))"
		done
	done
	exit "${FAKE_TREND_EXIT:-0}"
	;;
esac
echo "fake chaosbench: unknown command $cmd" >&2
exit 2
