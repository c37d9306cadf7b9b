#!/usr/bin/env bash
# Every etcd line chaosbench supports, built from the Go module proxy and run for a few seconds:
# 3.4.13 (the pseudo-version), 3.5, 3.6 and 3.7, alone and mixed along the upgrade path, on the docker
# backend when a Docker engine answers and on the embedded one always. Cold, each build takes about a
# minute (cached afterwards in ~/.cache/chaosbench/etcd); `make test` covers 3.5 and 3.6 only, to stay short.
#   ci/etcd-versions.sh [chaosbench binary]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=${1:-bin/chaosbench}
[ -x "$bin" ] || make build >/dev/null
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
backends=(embed)
if docker info >/dev/null 2>&1; then backends+=(docker); fi
specs=(v3.4.13 v3.5.35 v3.6.16 v3.7.3 v3.4.13,v3.4.13,v3.5.35 v3.5.35,v3.5.35,v3.6.16 v3.6.16,v3.6.16,v3.7.3)
"$bin" image build --binary-only --etcd-version v3.4.13,v3.5.35,v3.6.16,v3.7.3 >/dev/null
status=0
for backend in "${backends[@]}"; do
  for spec in "${specs[@]}"; do
    dir="$out/$backend-${spec//,/_}"
    if "$bin" run --cluster "$backend" --etcd-version "$spec" --workload txn-mixed --rate 200 --duration 3s \
        --progress none --out "$dir" >"$dir.log" 2>&1; then
      printf 'ok    %-7s %s\n' "$backend" "$spec"
    else
      printf 'FAIL  %-7s %s\n' "$backend" "$spec"; tail -5 "$dir.log"; status=1
    fi
  done
done
exit $status
