#!/usr/bin/env bash
# The nightly chaos job as Prow runs it (ci/prow/nightly-chaos-periodic.yaml), in the job's image (golang,
# with python3 installed by the job): the nightly-tagged scenarios of ci/chaos/ as one suite into
# $ARTIFACTS/suite (its JUnit copied to $ARTIFACTS/junit_chaosbench.xml for TestGrid), then tonight judged
# against the previous nights with `chaosbench trend --fail-on-regression`.
#
# The previous nights are the job's own earlier runs in its GCS bucket, HISTORY (gs://BUCKET/logs/JOB, where
# Prow's decoration uploaded their $ARTIFACTS), read through GCS's JSON API over HTTPS with python3's
# standard library: the job's image has no gcloud. Only what the trend reads is fetched (suite.json, and
# each run's summary.json and timeseries.jsonl), from the latest NIGHTS runs (default 14) other than this
# one (BUILD_ID). A run without suite.json (its suite never finished) is named and left out. When the
# history cannot be read (the bucket does not answer, refuses, or answers something that is not GCS's JSON),
# the job fails, saying so: a trend with a silently empty history would compare nothing and pass.
#
# The exit code is the suite's (chaosbench's outcome: 0 also for a known issue, which suite.md and the
# JUnit name; 4 for a violation or a crashed member, which --retry-harness never retries), else the trend's,
# else 1 when the history could not be fetched.
#
# Environment: ARTIFACTS, JOB_NAME and BUILD_ID (set by Prow); HISTORY (default
# gs://kubernetes-ci-logs/logs/$JOB_NAME); NIGHTS; TAGS, the scenarios' tags (default nightly; smoke for a
# quick check of the job itself); CHAOSBENCH, a chaosbench binary to use instead of
# building one; GCS_ENDPOINT, where GCS's JSON API answers (default https://storage.googleapis.com).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
: "${ARTIFACTS:?ARTIFACTS is not set (Prow sets it)}" "${JOB_NAME:?JOB_NAME is not set (Prow sets it)}"
history=${HISTORY:-gs://kubernetes-ci-logs/logs/$JOB_NAME}
chaosbench=${CHAOSBENCH:-}
if [ -z "$chaosbench" ]; then
	make build || exit 1
	chaosbench=bin/chaosbench
fi

status=0
"$chaosbench" suite ci/chaos --tags "${TAGS:-nightly}" --retry-harness --out "$ARTIFACTS/suite" || status=$?
cp "$ARTIFACTS/suite/junit.xml" "$ARTIFACTS/junit_chaosbench.xml" ||
	echo "no $ARTIFACTS/suite/junit.xml: the suite did not finish (exit code $status)"

# The previous nights go outside $ARTIFACTS, so that they are not uploaded again with tonight's.
nights_dir=$(mktemp -d)
trap 'rm -rf "$nights_dir"' EXIT
if python3 - "$history" "$nights_dir" "${NIGHTS:-14}" "${BUILD_ID:-}" <<'PY'; then
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

source, dest, want, current = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
endpoint = os.environ.get("GCS_ENDPOINT", "https://storage.googleapis.com").rstrip("/")
# What `chaosbench trend` reads of a night (results.SuiteFile, results.SummaryFile, results.TimeSeriesFile).
SUITE, PER_RUN = "suite.json", ("summary.json", "timeseries.jsonl")


class Unreadable(Exception):
    pass


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            return r.read()
    except urllib.error.HTTPError as e:
        raise Unreadable(f"{url}: HTTP {e.code} {e.reason}")
    except (urllib.error.URLError, OSError) as e:
        raise Unreadable(f"{url}: {getattr(e, 'reason', e)}")


def listing(bucket, prefix, delimiter=None):
    """Every object name and sub-prefix under prefix, through every page."""
    names, prefixes, token = [], [], None
    while True:
        q = {"prefix": prefix}
        if delimiter:
            q["delimiter"] = delimiter
        if token:
            q["pageToken"] = token
        url = f"{endpoint}/storage/v1/b/{urllib.parse.quote(bucket, safe='')}/o?{urllib.parse.urlencode(q)}"
        try:
            page = json.loads(get(url))
            names += [i["name"] for i in page.get("items", [])]
            prefixes += page.get("prefixes", [])
            token = page.get("nextPageToken")
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise Unreadable(f"{url}: not a GCS object listing ({e})")
        if not token:
            return names, prefixes


def main():
    if not source.startswith("gs://") or "/" not in source[5:]:
        raise Unreadable(f"HISTORY={source}: want gs://BUCKET/logs/JOB")
    bucket, _, prefix = source[5:].partition("/")
    prefix = prefix.rstrip("/") + "/"
    _, runs = listing(bucket, prefix, "/")
    # Prow's build IDs are numbers that grow with time.
    ids = sorted((r[len(prefix):].rstrip("/") for r in runs), key=lambda i: (len(i), i), reverse=True)
    ids = [i for i in ids if i.isdigit() and i != current][:want]
    fetched, unfinished = 0, []
    for build in ids:
        suite = f"{prefix}{build}/artifacts/suite/"
        names, _ = listing(bucket, suite)
        rel = [n[len(suite):] for n in names]
        if SUITE not in rel:
            unfinished.append(build)
            continue
        keep = [r for r in rel if r == SUITE or (r.count("/") == 1 and r.split("/")[1] in PER_RUN)]
        for r in keep:
            url = f"{endpoint}/storage/v1/b/{urllib.parse.quote(bucket, safe='')}/o/{urllib.parse.quote(suite + r, safe='')}?alt=media"
            path = os.path.join(dest, build, *r.split("/"))
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "wb") as f:
                f.write(get(url))
        fetched += 1
    for build in unfinished:
        print(f"history: run {build} has no suite.json (its suite did not finish): left out")
    if not ids:
        print(f"history: no previous runs in {source} (the job's first night?): the trend has nothing to compare tonight with")
    print(f"history: {fetched} previous nights fetched from {source}")


try:
    main()
except Unreadable as e:
    print(f"FAIL: cannot fetch the previous nights from {source}: {e}")
    sys.exit(1)
PY
	nights=("$ARTIFACTS/suite")
	if [ -n "$(ls -A "$nights_dir")" ]; then nights=("$nights_dir" "$ARTIFACTS/suite"); fi
	"$chaosbench" trend "${nights[@]}" --out "$ARTIFACTS/trend" --fail-on-regression
	code=$?
	if [ "$status" -eq 0 ]; then status=$code; fi
else
	echo "FAIL: the trend was not judged: the previous nights could not be fetched (see above)"
	if [ "$status" -eq 0 ]; then status=1; fi
fi
exit "$status"
