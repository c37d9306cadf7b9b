#!/usr/bin/env bash
# The verdicts of the CI scripts, in one place, so that they are tested (ci/scripts_test.go) against runs
# that must fail as well as runs that must pass. The scripts run things; this decides what the results mean.
# Whatever it cannot read is a failure, never a pass: a missing file, a missing field, a figure that is not a
# number, a value it does not know.
#
#   ci/judge.sh run NAME SUMMARY_JSON EXIT_CODE
#       one nightly scenario: prints "green|red NAME seed SEED outcome OUTCOME | REASON | ..." on one line and
#       exits 0 for green, 1 for red. Red: a non-zero exit code; summary.json missing or unreadable; its
#       "outcome" missing, unknown or not "ok"; a non-empty "errors"; an incomplete run; a check whose
#       verdict is a violation, unknown or unrecognised; a fault window that did not recover; a failed
#       threshold.
#   ci/judge.sh kube PRESET SUMMARY_JSON
#       make bench-kube: prints the generator's figures and PASS or FAIL; exits 1 when the generator did not
#       sustain the preset on one core, or when a figure it reports or judges is missing or not a number.
#   ci/judge.sh vs-etcd-round ROWS ROUND ORDER TOTAL ETCD_STDOUT ETCD_CPU CB_SUMMARY CB_CPU
#       make bench-vs-etcd, one round (ORDER etcd-first or chaosbench-first; TOTAL puts asked of etcd's
#       tool): reads etcd's benchmark output, chaosbench's summary.json and each tool's CPU time (a file
#       holding "USER SYS" seconds), prints the round's line and appends its figures to the file ROWS;
#       exits 1 naming the figure that is missing or not a number.
#   ci/judge.sh vs-etcd ROWS
#       make bench-vs-etcd, the verdict over every round of ROWS; exits 1 when chaosbench is slower (the
#       whole 95% interval of the mean ratio chaosbench/etcd below 1), or with fewer than two rounds.
#   ci/judge.sh t975 DF...
#       the 0.975 quantile of Student's t with DF degrees of freedom (the half-width factor of a two-sided
#       95% interval over DF+1 samples), one line per DF.
# Needs bash and python3 (its standard library only).
set -uo pipefail
if ! command -v python3 >/dev/null 2>&1; then
  if [ "${1:-}" = run ]; then
    printf '%-6s %-28s seed %-20s %s\n' red "${2:-?}" unknown "cannot judge: python3 not found (exit code ${4:-?})"
  else
    echo "FAIL: cannot judge: python3 not found" >&2
  fi
  exit 1
fi
exec python3 -I - "$@" <<'PY'
import json
import math
import statistics
import sys

# The outcomes summary.json's "outcome" may hold (outcome/outcome.go); only "ok" passes.
OUTCOMES = ("ok", "threshold-failed", "undecided", "harness-error", "incomplete", "violation")
# Check verdicts that do not fail a run: "nothing to check" is not a pass of the check, but the run's
# outcome does not count it against the run either (results.Decide); the outcome says what it is.
CHECKS_NOT_FAILING = ("ok", "nothing to check")


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
            return json.load(f)  # integers of any size stay exact (seeds are 63-bit)
    except FileNotFoundError:
        raise Unreadable(f"no {what} ({path})")
    except (OSError, ValueError) as e:
        raise Unreadable(f"{what} unreadable ({path}): {one_line(e)}")


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


# ---- the nightly ----

def judge_run(name, path, code):
    """The nightly verdict of one scenario: (green, seed, outcome, reasons)."""
    red = []
    seed, outcome = "unknown", "unknown"
    try:
        exit_code = [f"exit code {int(code)}"] if int(code) != 0 else []
    except ValueError:
        exit_code = [f"exit code unknown ({code!r})"]
    try:
        s = load_json(path)
        if not isinstance(s, dict):
            raise Unreadable(f"summary.json is not an object ({path})")
    except Unreadable as e:
        return False, seed, outcome, [str(e)] + exit_code

    if isinstance(s.get("seed"), int) and not isinstance(s.get("seed"), bool):
        seed = str(s["seed"])
    o = s.get("outcome")
    if o is None:
        red.append("summary.json has no outcome")
    elif o not in OUTCOMES:
        outcome = one_line(o)
        red.append(f"unknown outcome {o!r}")
    else:
        outcome = o
    rs = s.get("reasons", [])
    listed = 0
    if not isinstance(rs, list):
        red.append(f"reasons unreadable: {one_line(json.dumps(rs))}")
        rs, listed = [], None
    for r in rs:
        if isinstance(r, dict) and isinstance(r.get("kind"), str) and isinstance(r.get("text"), str):
            # An "ok" outcome has no reasons (outcome.Decide drops reasons of kind ok): any other is a
            # contradiction, and a contradiction is not a pass.
            if outcome != "ok" or r["kind"] != "ok":
                red.append(f"{one_line(r['kind'])}: {one_line(r['text'])}")
                listed += 1
        else:
            red.append(f"reason unreadable: {one_line(json.dumps(r))}")
    if outcome in OUTCOMES and outcome != "ok" and listed == 0:
        red.append(f"outcome {outcome} without reasons")
    # What the reasons already say is not said twice; what they leave out is.
    said = " | ".join(red)

    errors = s.get("errors", [])  # omitted when there are none
    if not isinstance(errors, list):
        red.append(f"errors unreadable: {one_line(json.dumps(errors))}")
    elif errors:
        untold = [one_line(e) for e in errors if one_line(e) not in said]
        red.append(f"{len(errors)} errors" + (": " + "; ".join(untold) if untold else " (among the reasons)"))
    incomplete = s.get("incomplete", False)
    if incomplete is True:
        why = one_line(s.get("incomplete_reason", ""))
        if outcome == "ok" or why not in said:
            red.append(f"incomplete: {why}")
    elif incomplete is not False:
        red.append(f"incomplete unreadable: {one_line(json.dumps(incomplete))}")

    # What the outcome already sums up, read again: a summary whose parts contradict its outcome is red.
    checks = s.get("checks", [])
    if not isinstance(checks, list):
        red.append("checks unreadable")
        checks = []
    bad = [c for c in checks if not isinstance(c, dict) or c.get("verdict") not in CHECKS_NOT_FAILING]
    if bad:
        red.append("checks: " + " ".join(
            f"{one_line(c.get('name', '?'))}={one_line(c.get('verdict', 'missing'))}" if isinstance(c, dict)
            else "unreadable" for c in bad))
    faults = s.get("faults", [])
    if not isinstance(faults, list):
        red.append("faults unreadable")
        faults = []
    not_recovered = [w for w in faults if not isinstance(w, dict) or w.get("outcome") != "recovered"]
    if not_recovered:
        red.append(f"{len(not_recovered)} fault windows not recovered")
    thresholds = s.get("thresholds", [])
    if not isinstance(thresholds, list):
        red.append("thresholds unreadable")
        thresholds = []
    failed = [t for t in thresholds if not isinstance(t, dict) or t.get("verdict") not in ("pass", "n/a")]
    if failed:
        red.append("thresholds failed: " + " ".join(
            one_line(t.get("expr", "?")) if isinstance(t, dict) else "unreadable" for t in failed))
    red += exit_code
    green = not red and outcome == "ok"
    return green, seed, outcome, red


def cmd_run(name, path, code):
    green, seed, outcome, reasons = judge_run(name, path, code)
    line = f"{'green' if green else 'red':<6} {name:<28} seed {seed:<20} outcome {outcome}"
    if reasons:
        line += " | " + " | ".join(reasons)
    print(line)
    return 0 if green else 1


# ---- make bench-kube ----

def cmd_kube(preset, path):
    try:
        s = load_json(path)
        if not isinstance(s, dict):
            raise Unreadable(f"summary.json is not an object ({path})")
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
        print(f"FAIL: cannot judge the {preset} preset: {e}")
        return 1
    print(f"generator over the load: {cpu:.1f} CPU-seconds ({cores:.2f} cores), {per_cpu:.0f} requests per "
          f"CPU-second, {requests:.0f} requests, live heap {live / 2**20:.0f} MB, peak RSS {rss / 2**20:.0f} MB; "
          f"{missed:.2f}% of slots late")
    what = f"the {preset} preset on one core ({cores:.2f} cores used, {missed:.2f}% of slots late)"
    if cores < 1 and missed < 1:
        print(f"PASS: the generator sustained {what}")
        return 0
    print(f"FAIL: the generator did not sustain {what}")
    return 1


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


def cmd_vs_etcd_round(rows, rnd, order, total, etcd_out, etcd_cpu, cb_summary, cb_cpu):
    try:
        if order not in ORDERS:
            raise Unreadable(f"order {order!r} is not one of {', '.join(ORDERS)}")
        rnd = int(number("round", rnd))
        ereq = number("total puts", total)
        erps = etcd_requests_per_sec(etcd_out)
        ecpu = cpu_seconds(etcd_cpu, "etcd benchmark CPU time")
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


def t975(df):
    """The 0.975 quantile of Student's t distribution with df degrees of freedom: the t with
    P(|T| > t) = 0.05, found by bisection on the two-sided tail I_{df/(df+t^2)}(df/2, 1/2)."""
    if not df > 0:
        raise ValueError(f"degrees of freedom {df}: must be positive")
    lo, hi = 0.0, 1000.0  # t(0.975, 1) = 12.7; the tail at 1000 is far below 0.05 for every df > 0
    for _ in range(200):
        mid = (lo + hi) / 2
        if betai(df / 2, 0.5, df / (df + mid * mid)) > 0.05:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def betai(a, b, x):
    """The regularized incomplete beta function I_x(a, b) (Numerical Recipes, 6.4)."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):
        return front * betacf(a, b, x) / a
    return 1 - front * betacf(b, a, 1 - x) / b


def betacf(a, b, x):
    """The continued fraction of the incomplete beta function, by the modified Lentz method."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1, a - 1
    c, d = 1.0, 1 - qab * x / qap
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 100000):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1 + aa * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < 1e-15:
            return h
    raise ArithmeticError(f"incomplete beta ({a}, {b}, {x}) did not converge")


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


def median_interval(xs):
    """A distribution-free 95% interval of the median of xs: the order statistics x(k) and x(n+1-k) with the
    largest k for which P(Binomial(n, 1/2) < k) <= 0.025; (None, None) when n is too small for one."""
    xs, n = sorted(xs), len(xs)
    k, below = 0, 0.0
    while True:
        below += math.comb(n, k) / 2 ** n
        if below > 0.025:
            break
        k += 1
    if k == 0:
        return None, None
    return xs[k - 1], xs[n - k]


def cmd_vs_etcd(path):
    try:
        rows = read_rows(path)
    except Unreadable as e:
        print(f"FAIL: {e}")
        return 1
    n = len(rows)
    if n < 2:
        print(f"FAIL: cannot decide from {n} round(s): the interval needs at least two")
        return 1
    ratios = [r["cb_rps"] / r["etcd_rps"] for r in rows]
    mean = statistics.mean(ratios)
    t = t975(n - 1)
    half = t * statistics.stdev(ratios) / math.sqrt(n)
    def med(k, requests=None):
        """The median of column k over the rounds; per request of column requests, in microseconds."""
        return statistics.median(r[k] * 1e6 / r[requests] if requests else r[k] for r in rows)

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
            print(f"mean ratio when {order.replace('-', ' ')}: {statistics.mean(rs):.3f} over {len(rs)} rounds")
    print(f"ratio chaosbench/etcd: mean {mean:.3f}, 95% interval [{mean - half:.3f}, {mean + half:.3f}]"
          f" over {n} rounds (t = {t:.3f}, {n - 1} degrees of freedom)")
    lo, hi = median_interval(ratios)
    medr = statistics.median(ratios)
    if lo is None:
        print(f"ratio chaosbench/etcd: median {medr:.3f} (a 95% interval of the median needs at least 6 rounds)")
    else:
        print(f"ratio chaosbench/etcd: median {medr:.3f}, 95% interval [{lo:.3f}, {hi:.3f}] (order statistics, distribution-free)")
    cpu = med('cb_load_cpu_s', 'cb_requests') / med('etcd_cpu_s', 'etcd_requests')
    print(f"performance targets (issue 15, reported, not judged): median ratio >= 1.10: {'met' if medr >= 1.10 else 'not met'} ({medr:.3f});"
          f" client CPU per put <= 0.9x etcd's: {'met' if cpu <= 0.9 else 'not met'} ({cpu:.2f}x, load alone against etcd's whole process)")
    if mean + half < 1:
        print("FAIL: chaosbench is slower than etcd's benchmark")
        return 1
    if mean >= 1:
        print("PASS: chaosbench, recording everything, is at least as fast as etcd's benchmark")
    else:
        print("PASS: no measurable difference: chaosbench, recording everything, keeps up with etcd's benchmark")
    return 0


def cmd_t975(*dfs):
    for df in dfs:
        print(f"{t975(number('degrees of freedom', df)):.4f}")
    return 0


COMMANDS = {"run": (cmd_run, 3), "kube": (cmd_kube, 2), "vs-etcd-round": (cmd_vs_etcd_round, 8),
            "vs-etcd": (cmd_vs_etcd, 1), "t975": (cmd_t975, None)}


def main(args):
    if not args or args[0] not in COMMANDS or len(args) - 1 != (COMMANDS[args[0]][1] or max(1, len(args) - 1)):
        print("usage: ci/judge.sh run|kube|vs-etcd-round|vs-etcd|t975 ARGS... (see the header of ci/judge.sh)",
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
