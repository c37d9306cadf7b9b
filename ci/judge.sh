#!/usr/bin/env bash
# What the CI scripts' results mean, in one place, tested by ci/scripts_test.go against results that must
# pass as well as results that must fail. chaosbench decides every verdict, once (results.Decide and the jobs
# built on it); this script only reads the outcome chaosbench wrote and never decides again: no figure,
# check or threshold is judged here, and no statistics are computed. Whatever it cannot read is never a
# pass: a missing file, a missing or unknown outcome, reasons it cannot read, or an exit code that
# contradicts the written outcome.
#
# Its exit code is the written outcome's, as chaosbench's own exit codes: 0 ok or known-issue, 1 undecided
# or harness-error, 3 threshold-failed, 4 violation or member-crashed, 130 incomplete. When the outcome cannot
# be read, it is chaosbench's own exit code if that is one of these (2, usage, included) and not 0, else 1;
# when the outcome is read but chaosbench exited otherwise, the line is red and the exit code is the written
# outcome's, or 1 when that is 0 (something failed after the outcome was written).
#
#   ci/judge.sh outcome NAME FILE EXIT_CODE
#   ci/judge.sh run NAME SUMMARY_JSON EXIT_CODE
#       one job's verdict, from the file holding its outcome (summary.json of a run, compare.json of a
#       comparison, suite.json of a suite, trend.json of a trend, qualification.json) and the exit code
#       chaosbench returned: prints "green|red NAME seed SEED outcome OUTCOME | KIND: REASON | ..." on one
#       line (green: ok, or known issues only, named), and exits as above. `run` is the nightly's name for it.
#   ci/judge.sh kube PRESET SUMMARY_JSON EXIT_CODE
#       make bench-kube: prints the generator's figures (informational) and the run's outcome, which decides:
#       the run carries the bar as a chaosbench threshold (missed<1%: under 1% of its slots started late),
#       and the generator is pinned to one CPU. A figure it prints that is missing or not a number fails it
#       (exit 1): nothing is printed that was not measured.
#   ci/judge.sh vs-etcd-round ROWS ROUND ORDER TOTAL ETCD_STDOUT ETCD_CPU CB_SUMMARY CB_CPU CB_EXIT_CODE
#       make bench-vs-etcd, one round (ORDER etcd-first or chaosbench-first; TOTAL puts asked of etcd's
#       tool): reads etcd's benchmark output, chaosbench's summary.json (whose outcome must be a pass: a run
#       that did not pass measured nothing comparable; its outcome's exit code then) and each tool's CPU time
#       (a file holding "USER SYS" seconds), prints the round's line and appends its figures to ROWS; exits 1
#       naming a figure that is missing or not a number.
#   ci/judge.sh vs-etcd ROWS
#       make bench-vs-etcd, over every round of ROWS: the median throughput of each tool, the ratio
#       chaosbench/etcd per round and its median, per order, and the client CPU per put. These figures are
#       informational (no statistics, no verdict); exits 1 only when ROWS cannot be read or holds no round.
# Needs bash and python3 (its standard library only).
set -uo pipefail
if ! command -v python3 >/dev/null 2>&1; then
  case "${1:-}" in
  run | outcome)
    printf '%-6s %-28s seed %-20s %s\n' red "${2:-?}" unknown "cannot read the outcome: python3 not found (exit code ${4:-?})"
    case "${4:-}" in 1 | 2 | 3 | 4 | 130) exit "$4" ;; esac
    ;;
  *) echo "FAIL: cannot read the results: python3 not found" >&2 ;;
  esac
  exit 1
fi
exec python3 -I - "$@" <<'PY'
import json
import math
import statistics
import sys

# The outcomes chaosbench writes (outcome/outcome.go) and the exit code of each: the one table of both.
EXIT = {"ok": 0, "known-issue": 0, "threshold-failed": 3, "undecided": 1, "harness-error": 1,
        "incomplete": 130, "member-crashed": 4, "violation": 4}
# Exit codes chaosbench returns (docs/outcomes.md), usage included.
CODES = (0, 1, 2, 3, 4, 130)


class Unreadable(Exception):
    """A figure or file that could not be read: always a failure."""


def one_line(v):
    return " ".join(str(v).split())


def is_number(v):
    # bool is an int in Python; true is not a figure.
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def number(what, v):
    """v as a float, or Unreadable naming what."""
    if isinstance(v, str):
        try:
            f = float(v.strip())
        except ValueError:
            raise Unreadable(f"{what} is missing" if not v.strip() else f"{what} is not a number: {v!r}")
        if not math.isfinite(f):
            raise Unreadable(f"{what} is not a number: {v!r}")
        return f
    if v is None:
        raise Unreadable(f"{what} is missing")
    if not is_number(v):
        raise Unreadable(f"{what} is not a number: {v!r}")
    return float(v)


def load_json(path, what="summary.json"):
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)  # integers of any size stay exact (seeds are 63-bit)
    except FileNotFoundError:
        raise Unreadable(f"no {what} ({path})")
    except (OSError, ValueError) as e:
        raise Unreadable(f"{what} unreadable ({path}): {one_line(e)}")
    if not isinstance(doc, dict):
        raise Unreadable(f"{what} is not an object ({path})")
    return doc


def field(doc, dotted, what="summary.json"):
    """The value at a dotted path of a JSON object, or Unreadable naming it."""
    v = doc
    for part in dotted.split("."):
        if not isinstance(v, dict) or part not in v:
            raise Unreadable(f"{what} has no {dotted}")
        v = v[part]
    return v


def figure(doc, dotted, what="summary.json"):
    """The JSON number at a dotted path: a string, even one that reads as a number, is not a figure."""
    v = field(doc, dotted, what)
    if isinstance(v, str):
        raise Unreadable(f"{what} {dotted} is not a number: {v!r}")
    return number(f"{what} {dotted}", v)


def exit_code(code):
    """chaosbench's exit code as an int, or None when it is not a number."""
    try:
        return int(code)
    except ValueError:
        return None


# ---- the outcome chaosbench wrote ----

def read_outcome(path, code):
    """The outcome written in path, read and never decided again: (outcome, reasons, seed, problems).
    outcome is None when it cannot be read; problems say what is unreadable or contradicts the exit code."""
    name = path.rsplit("/", 1)[-1]
    try:
        doc = load_json(path, name)
    except Unreadable as e:
        c = exit_code(code)
        return None, [], "unknown", [str(e)] + ([f"exit code {code}"] if c != 0 else [])
    seed = doc.get("seed")
    seed = str(seed) if isinstance(seed, int) and not isinstance(seed, bool) else "-"
    problems = []
    o = doc.get("outcome")
    if o is None:
        problems.append(f"{name} has no outcome")
        o = None
    elif o not in EXIT:
        problems.append(f"unknown outcome {one_line(o)!r}")
        o = None
    reasons = []
    rs = doc.get("reasons", [])  # omitted when there are none
    if not isinstance(rs, list):
        problems.append(f"reasons unreadable: {one_line(json.dumps(rs))}")
        rs = []
    for r in rs:
        if isinstance(r, dict) and isinstance(r.get("kind"), str) and isinstance(r.get("text"), str):
            reasons.append(f"{one_line(r['kind'])}: {one_line(r['text'])}")
        else:
            problems.append(f"reason unreadable: {one_line(json.dumps(r))}")
    c = exit_code(code)
    if c is None:
        problems.append(f"exit code unknown ({code!r})")
    elif o is not None and c != EXIT[o]:
        problems.append(f"exit code {c}, but the written outcome {o} is exit code {EXIT[o]}")
    elif o is None and c != 0:
        problems.append(f"exit code {c}")
    return o, reasons, seed, problems


def judged_code(outcome, problems, code):
    """The exit code of a judged job: the written outcome's; when it cannot be read, chaosbench's own
    (when it is one chaosbench returns and not 0), else 1; a contradiction is never 0."""
    if outcome is not None:
        c = EXIT[outcome]
        return c if c != 0 or not problems else 1
    c = exit_code(code)
    return c if c in CODES and c != 0 else 1


def cmd_outcome(name, path, code):
    outcome, reasons, seed, problems = read_outcome(path, code)
    green = outcome is not None and EXIT[outcome] == 0 and not problems
    line = f"{'green' if green else 'red':<6} {name:<28} seed {seed:<20} outcome {outcome or 'unknown'}"
    if reasons or problems:
        line += " | " + " | ".join(problems + reasons)
    print(line)
    return 0 if green else judged_code(outcome, problems, code)


# ---- make bench-kube ----

def cmd_kube(preset, path, code):
    try:
        s = load_json(path)
        requests = figure(s, "total.count")
        if requests <= 0:
            raise Unreadable("summary.json total.count is 0: the generator sent no request")
        cpu = figure(s, "generator_load.cpu_s")
        cores = figure(s, "generator_load.cores")
        per_cpu = figure(s, "generator_load.requests_per_cpu_s")
        rss = figure(s, "generator_load.max_rss_bytes")
        live = figure(s, "generator_load.live_heap_bytes")
        missed = figure(s, "schedule.missed_percent")
        if cpu <= 0 or cores <= 0 or per_cpu <= 0:
            raise Unreadable(f"summary.json generator_load measured no CPU time (cpu_s {cpu}, cores {cores})")
    except Unreadable as e:
        print(f"FAIL: cannot read the {preset} preset's figures: {e}")
        return 1
    print(f"generator over the load (informational): {cpu:.1f} CPU-seconds ({cores:.2f} cores), {per_cpu:.0f} requests per "
          f"CPU-second, {requests:.0f} requests, live heap {live / 2**20:.0f} MB, peak RSS {rss / 2**20:.0f} MB; "
          f"{missed:.2f}% of slots late")
    outcome, reasons, _, problems = read_outcome(path, code)
    what = f"the {preset} preset on one core"
    said = "; ".join(problems + reasons)
    if outcome is not None and EXIT[outcome] == 0 and not problems:
        print(f"PASS: outcome {outcome}: the generator sustained {what}" + (f" ({said})" if said else ""))
        return 0
    print(f"FAIL: outcome {outcome or 'unknown'}: the generator did not sustain {what}" + (f": {said}" if said else ""))
    return judged_code(outcome, problems, code)


# ---- make bench-vs-etcd ----

ORDERS = ("etcd-first", "chaosbench-first")
COLUMNS = ("round", "order", "etcd_rps", "etcd_requests", "etcd_cpu_s", "cb_rps", "cb_requests", "cb_load_cpu_s", "cb_cpu_s")


def cpu_seconds(path, what):
    """user + system seconds from a file holding "USER SYS" (bash's time with TIMEFORMAT='%3U %3S')."""
    try:
        with open(path, encoding="utf-8") as f:
            parts = f.read().split()
    except OSError as e:
        raise Unreadable(f"{what} unreadable: {one_line(e)}")
    if len(parts) != 2:
        raise Unreadable(f"{what} unreadable: expected \"USER SYS\" seconds in {path}, found {' '.join(parts)!r}")
    return number(f"{what} (user)", parts[0]) + number(f"{what} (system)", parts[1])


def etcd_requests_per_sec(path):
    """The "Requests/sec:" figure of etcd's benchmark tool's report."""
    try:
        with open(path, encoding="utf-8") as f:
            lines = [l.split() for l in f if l.strip().startswith("Requests/sec:")]
    except OSError as e:
        raise Unreadable(f"etcd benchmark output unreadable: {one_line(e)}")
    if len(lines) != 1 or len(lines[0]) != 2:
        raise Unreadable(f"etcd benchmark Requests/sec is missing from its output ({path})")
    return number("etcd benchmark Requests/sec", lines[0][1])


def cmd_vs_etcd_round(rows, rnd, order, total, etcd_out, etcd_cpu, cb_summary, cb_cpu, cb_code):
    try:
        if order not in ORDERS:
            raise Unreadable(f"order {order!r} is not one of {', '.join(ORDERS)}")
        rnd = int(number("round", rnd))
        ereq = number("total puts", total)
        erps = etcd_requests_per_sec(etcd_out)
        ecpu = cpu_seconds(etcd_cpu, "etcd benchmark CPU time")
        outcome, reasons, _, problems = read_outcome(cb_summary, cb_code)
        if outcome is None or EXIT[outcome] != 0 or problems:
            print(f"FAIL: round {rnd}: chaosbench's run did not pass, so it measured nothing comparable: outcome "
                  f"{outcome or 'unknown'} | " + " | ".join(problems + reasons))
            return judged_code(outcome, problems, cb_code)
        s = load_json(cb_summary, "chaosbench summary.json")
        crps = figure(s, "total.throughput", "chaosbench summary.json")
        creq = figure(s, "total.count", "chaosbench summary.json")
        cload = figure(s, "generator_load.cpu_s", "chaosbench summary.json")
        ccpu = cpu_seconds(cb_cpu, "chaosbench CPU time")
        if min(erps, ereq, ecpu, crps, creq, cload, ccpu) <= 0:
            raise Unreadable("a figure is zero (throughput, requests or CPU): nothing was measured")
    except Unreadable as e:
        print(f"FAIL: round {rnd}: {e}")
        return 1
    with open(rows, "a", encoding="utf-8") as f:
        f.write(",".join(str(v) for v in (rnd, order, erps, int(ereq), ecpu, crps, int(creq), cload, ccpu)) + "\n")
    print(f"round {rnd} ({order.replace('-', ' ')}): etcd benchmark {erps:.1f} puts/s, chaosbench {crps:.1f} puts/s,"
          f" ratio {crps / erps:.3f}; client CPU per put: etcd benchmark {ecpu * 1e6 / ereq:.1f} us (whole process),"
          f" chaosbench {cload * 1e6 / creq:.1f} us (load alone), {ccpu * 1e6 / creq:.1f} us (whole process)")
    return 0


def read_rows(path):
    try:
        with open(path, encoding="utf-8") as f:
            lines = [l.strip() for l in f if l.strip()]
    except OSError as e:
        raise Unreadable(f"rounds unreadable: {one_line(e)}")
    rows = []
    for i, l in enumerate(lines, 1):
        parts = l.split(",")
        if len(parts) != len(COLUMNS):
            raise Unreadable(f"round line {i} has {len(parts)} fields, not {len(COLUMNS)}: {l!r}")
        row = dict(zip(COLUMNS, parts))
        if row["order"] not in ORDERS:
            raise Unreadable(f"round line {i}: order {row['order']!r} is not one of {', '.join(ORDERS)}")
        for k in COLUMNS[2:]:
            row[k] = number(f"round line {i} {k}", row[k])
            if row[k] <= 0:
                raise Unreadable(f"round line {i} {k} is {row[k]}: nothing was measured")
        rows.append(row)
    return rows


def cmd_vs_etcd(path):
    try:
        rows = read_rows(path)
    except Unreadable as e:
        print(f"FAIL: {e}")
        return 1
    n = len(rows)
    if n == 0:
        print("FAIL: no round was measured")
        return 1

    def med(k, requests=None):
        """The median of column k over the rounds; per request of column requests, in microseconds."""
        return statistics.median(r[k] * 1e6 / r[requests] if requests else r[k] for r in rows)

    ratios = [r["cb_rps"] / r["etcd_rps"] for r in rows]
    print(f"over {n} rounds (informational: these figures are reported, not judged)")
    print(f"median throughput: etcd benchmark {med('etcd_rps'):.0f} puts/s, chaosbench {med('cb_rps'):.0f} puts/s")
    print("median client CPU per put:")
    print(f"  etcd benchmark, whole process:  {med('etcd_cpu_s', 'etcd_requests'):6.1f} us"
          " (the load, its start-up and its final report)")
    print(f"  chaosbench, load alone:         {med('cb_load_cpu_s', 'cb_requests'):6.1f} us"
          " (summary.json generator_load: from the first request to the last, recording histograms,"
          " interval log and history included)")
    print(f"  chaosbench, whole process:      {med('cb_cpu_s', 'cb_requests'):6.1f} us"
          " (also its start-up, and writing summary, histograms and reports; the consistency check and"
          " metrics scraping are off)")
    for order in ORDERS:
        rs = [r["cb_rps"] / r["etcd_rps"] for r in rows if r["order"] == order]
        if rs:
            print(f"median ratio when {order.replace('-', ' ')}: {statistics.median(rs):.3f} over {len(rs)} rounds")
    print(f"ratio chaosbench/etcd per round: {' '.join(f'{x:.3f}' for x in ratios)}; median {statistics.median(ratios):.3f},"
          f" from {min(ratios):.3f} to {max(ratios):.3f}")
    cpu = med('cb_load_cpu_s', 'cb_requests') / med('etcd_cpu_s', 'etcd_requests')
    print(f"client CPU per put: chaosbench's load alone {cpu:.2f}x etcd's whole process")
    return 0


COMMANDS = {"outcome": (cmd_outcome, 3), "run": (cmd_outcome, 3), "kube": (cmd_kube, 3),
            "vs-etcd-round": (cmd_vs_etcd_round, 9), "vs-etcd": (cmd_vs_etcd, 1)}


def main(args):
    if not args or args[0] not in COMMANDS or len(args) - 1 != COMMANDS[args[0]][1]:
        print("usage: ci/judge.sh outcome|run|kube|vs-etcd-round|vs-etcd ARGS... (see the header of ci/judge.sh)",
              file=sys.stderr)
        return 2
    fn, _ = COMMANDS[args[0]]
    return fn(*args[1:])


try:
    sys.exit(main(sys.argv[1:]))
except SystemExit:
    raise
except BaseException as e:  # a bug here must not look like a pass
    print(f"FAIL: ci/judge.sh {' '.join(sys.argv[1:2])}: {type(e).__name__}: {one_line(e)}")
    sys.exit(1)
PY
