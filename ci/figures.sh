#!/usr/bin/env bash
# make figures: measure the figures of docs/figures.md again and write each into the page, with the command,
# the commit and the machine that produced it. Every figure is a block of the page,
#   <!-- figure NAME -->
#   ...
#   <!-- end figure NAME -->
# that this script replaces whole with the command's output (its last TAIL lines, 60 by default); the text
# around the blocks (how a figure got where it is) is the page's own and is kept. A figure whose command
# fails keeps what it had, and the script exits 1 naming it, after measuring the others.
#
# FIGURES="bench-kube bench-checker" measures some figures (default: all of them, in the order below);
# PAGE is the page to write (default docs/figures.md); FIGURE_<name> (dashes as underscores) replaces a
# figure's command, for a figure of one's own or a test.
set -uo pipefail
cd "$(dirname "$0")/.."

# The figures and the commands that measure them: each runs the bench target docs/figures.md describes.
declare -A commands=(
  [bench-vs-etcd]="ROUNDS=10 TOTAL=20000 make bench-vs-etcd"
  [bench-kube]="make bench-kube && PRESET=xlarge make bench-kube"
  [bench-scale]="make bench-scale"
  [bench-checker]="make bench-checker"
  [recording]="go test -run '^\$' -bench 'History|WriterPut' -benchmem -count 1 ./results/history"
)
order="bench-vs-etcd bench-kube bench-scale bench-checker recording"
page=${PAGE:-docs/figures.md}
tail_lines=${TAIL:-60}
figures=${FIGURES:-$order}

if [ ! -f "$page" ]; then
  echo "figures: $page: no such page" >&2
  exit 2
fi

# machine describes where the figures are measured: what a reader needs to compare them with their own.
machine() {
  local cpu mem
  cpu=$(awk -F': ' '/^model name/ {print $2; exit}' /proc/cpuinfo 2>/dev/null)
  mem=$(awk '/^MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo 2>/dev/null)
  printf '%s cores (%s), %s memory, %s %s, host %s' "$(nproc)" "${cpu:-unknown CPU}" "${mem:-unknown}" \
    "$(uname -s)" "$(uname -r)" "$(hostname)"
}

# replace writes the block of figure $1 in the page from file $2, or fails when the page has no such block.
replace() {
  local name=$1 content=$2 out
  if ! grep -qxF "<!-- figure $name -->" "$page" || ! grep -qxF "<!-- end figure $name -->" "$page"; then
    echo "figures: $page has no block <!-- figure $name --> ... <!-- end figure $name -->" >&2
    return 1
  fi
  out=$(mktemp)
  awk -v begin="<!-- figure $name -->" -v end="<!-- end figure $name -->" -v content="$content" '
    $0 == begin { print; while ((getline line < content) > 0) print line; skip = 1; next }
    $0 == end { skip = 0 }
    !skip { print }
  ' "$page" >"$out" && cat "$out" >"$page"
  rm -f "$out"
}

commit=$(git describe --always --dirty 2>/dev/null || echo unknown)
failed=()
for name in $figures; do
  var="FIGURE_${name//-/_}"
  cmd=${!var:-${commands[$name]:-}}
  if [ -z "$cmd" ]; then
    echo "figures: unknown figure $name (known: $order)" >&2
    exit 2
  fi
  echo "=== figure $name: $cmd"
  log=$(mktemp)
  started=$(date -u +%Y-%m-%dT%H:%MZ)
  bash -c "$cmd" 2>&1 | tee "$log"
  code=${PIPESTATUS[0]}
  if [ "$code" -ne 0 ]; then
    echo "=== figure $name: exit code $code; $page keeps the figure it had"
    failed+=("$name")
    rm -f "$log"
    continue
  fi
  block=$(mktemp)
  {
    echo "Command: \`$cmd\` at commit \`$commit\`, $started. Machine: $(machine)."
    echo
    echo '```text'
    tail -n "$tail_lines" "$log"
    echo '```'
  } >"$block"
  replace "$name" "$block" || failed+=("$name")
  rm -f "$log" "$block"
done

if [ ${#failed[@]} -gt 0 ]; then
  echo "figures: not measured: ${failed[*]}" >&2
  exit 1
fi
echo "figures: $page written"
