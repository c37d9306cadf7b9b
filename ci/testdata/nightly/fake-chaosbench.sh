#!/usr/bin/env bash
# A stand-in for `chaosbench run --config FILE --out DIR ...` in the nightly's test: FILE says what the run
# leaves behind, in lines "summary: FIXTURE" (a file of ci/testdata/run copied to DIR/summary.json; none:
# no summary.json) and "exit: CODE".
set -eu
config= out=
while [ $# -gt 0 ]; do
  case $1 in
    --config) config=$2; shift ;;
    --out) out=$2; shift ;;
  esac
  shift
done
summary=$(sed -n 's/^summary: //p' "$config")
code=$(sed -n 's/^exit: //p' "$config")
mkdir -p "$out"
if [ "$summary" != none ]; then cp "$(dirname "$0")/../run/$summary" "$out/summary.json"; fi
echo "fake run of $config: $summary, exit code $code"
exit "$code"
