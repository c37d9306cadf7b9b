#!/usr/bin/env bash
# Builds one of etcd's own tools from the Go module proxy and prints the binary's path.
#   ci/etcd-tool.sh benchmark [version]   -> etcd's tools/benchmark
#   ci/etcd-tool.sh etcdctl   [version]   -> etcdctl
# With ETCD_CLIENT=vX.Y.Z the tool is linked against that etcd client library (and the gRPC it requires)
# instead of its own: bench-vs-etcd uses the client chaosbench links, so that both tools share one client
# stack and the comparison measures the tools themselves.
# The wrapper module lives in a temporary directory and is removed; binaries are cached per tool and
# version under ${XDG_CACHE_HOME:-~/.cache}/chaosbench/tools. Nothing is vendored into this repository.
set -euo pipefail
tool=${1:?usage: etcd-tool.sh benchmark|etcdctl [version]}
ver=${2:-v3.6.8}
cache=${XDG_CACHE_HOME:-$HOME/.cache}/chaosbench/tools
client=${ETCD_CLIENT:-}
bin=$cache/$tool-$ver${client:+-client-$client}
if [ -x "$bin" ]; then echo "$bin"; exit 0; fi

case $tool in
  benchmark) mod=go.etcd.io/etcd/v3; pkg=go.etcd.io/etcd/v3/tools/benchmark/cmd
             main='package main

import (
	"os"

	"go.etcd.io/etcd/v3/tools/benchmark/cmd"
)

func main() {
	if err := cmd.RootCmd.Execute(); err != nil {
		os.Exit(1)
	}
}' ;;
  etcdctl)   mod=go.etcd.io/etcd/etcdctl/v3; pkg=go.etcd.io/etcd/etcdctl/v3/ctlv3
             main='package main

import "go.etcd.io/etcd/etcdctl/v3/ctlv3"

func main() { ctlv3.MustStart() }' ;;
  *) echo "unknown tool $tool" >&2; exit 2 ;;
esac

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$cache"
cd "$work"
printf 'module chaosbench-tool-wrapper\n\ngo 1.26\n' > go.mod
printf '%s\n' "$main" > main.go
echo "building etcd $tool $ver from the module proxy (once; cached in $cache)" >&2
pins=()
if [ -n "$client" ]; then
  pins=("go.etcd.io/etcd/client/v3@$client" "go.etcd.io/etcd/api/v3@$client" "go.etcd.io/etcd/client/pkg/v3@$client")
fi
if ! { go get "$mod@$ver" "${pins[@]}" && CGO_ENABLED=0 go build -o "$bin.tmp" .; } >"$work/build.log" 2>&1; then
  cat "$work/build.log" >&2
  exit 1
fi
mv "$bin.tmp" "$bin"
echo "$bin"
