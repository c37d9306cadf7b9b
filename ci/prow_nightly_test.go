package ci

import (
	"bytes"
	"errors"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/etcd-chaosbench/chaosbench/internal/fakegcs"
)

// history is the job's GCS history: two finished nights (1001, 1003) with one run each, a night whose suite
// did not finish (1002), tonight's own run (1004, which must not be its own baseline), and another job.
func history() map[string]string {
	const job = "logs/ci-etcd-chaosbench-nightly/"
	objs := map[string]string{job + "1002/build-log.txt": "x", job + "1002/artifacts/suite/smoke/summary.json": "{}",
		"logs/another-job/1001/artifacts/suite/suite.json": "{}"}
	for _, night := range []string{"1001", "1003", "1004"} {
		suite := job + night + "/artifacts/suite/"
		for _, f := range []string{"suite.json", "suite.html", "junit.xml", "smoke/summary.json", "smoke/timeseries.jsonl",
			"smoke/history.bin", "smoke/report.html", "smoke/member-1/member.log"} {
			objs[suite+f] = night + " " + f
		}
		objs[job+night+"/finished.json"] = "{}"
	}
	return objs
}

// TestProwNightly runs ci/prow-nightly.sh with a stand-in chaosbench against a stand-in GCS: the previous
// nights are fetched (only what the trend reads, tonight's run left out) and the trend compares tonight
// with them; a history that cannot be fetched fails the night, saying so, and is never silently empty;
// the night's exit code is the suite's (a known issue passes, a violation fails and is run once), else
// the trend's.
func TestProwNightly(t *testing.T) {
	fake, err := filepath.Abs("testdata/prow/fake-chaosbench.sh")
	if err != nil {
		t.Fatal(err)
	}
	const fetched = "trend night: 1001: smoke/summary.json smoke/timeseries.jsonl suite.json (1001 suite.json)\n" +
		"trend night: 1003: smoke/summary.json smoke/timeseries.jsonl suite.json (1003 suite.json)\n" +
		"trend night: tonight\n"
	for _, tc := range []struct {
		name       string
		gcs        *fakegcs.Bucket // nil: nothing answers
		suite      int             // the suite's exit code
		suiteSays  string
		trend      int // the trend's exit code
		code       int // the night's
		says       []string
		trendNight string // what the trend was given ("" : not run)
	}{
		{"ok", &fakegcs.Bucket{Objects: history()}, 0, "ok", 0, 0,
			[]string{"history: run 1002 has no suite.json (its suite did not finish): left out", "history: 2 previous nights fetched"}, fetched},
		{"a known issue passes", &fakegcs.Bucket{Objects: history()}, 0, "known-issue: etcd-io/etcd#18424", 0, 0,
			[]string{"suite: known-issue"}, fetched},
		{"a violation fails, run once", &fakegcs.Bucket{Objects: history()}, 4, "violation", 0, 4, nil, fetched},
		{"a crashed member fails, run once", &fakegcs.Bucket{Objects: history()}, 4, "member-crashed", 3, 4, nil, fetched},
		{"a regression fails", &fakegcs.Bucket{Objects: history()}, 0, "ok", 3, 3, nil, fetched},
		{"the first night", &fakegcs.Bucket{Objects: map[string]string{}}, 0, "ok", 0, 0,
			[]string{"history: no previous runs in gs://kubernetes-ci-logs/logs/ci-etcd-chaosbench-nightly (the job's first night?)"}, "trend night: tonight\n"},
		{"unreachable", nil, 0, "ok", 0, 1,
			[]string{"FAIL: cannot fetch the previous nights from gs://kubernetes-ci-logs/logs/ci-etcd-chaosbench-nightly: ", "FAIL: the trend was not judged"}, ""},
		{"unreachable after a violation", nil, 4, "violation", 0, 4, []string{"FAIL: the trend was not judged"}, ""},
		{"refused", &fakegcs.Bucket{Objects: history(), Refuse: true}, 0, "ok", 0, 1, []string{"HTTP 403"}, ""},
		{"not GCS", &fakegcs.Bucket{Objects: history(), Garbage: true}, 0, "ok", 0, 1, []string{"not a GCS object listing"}, ""},
		{"an object fails", &fakegcs.Bucket{Objects: history(), Broken: "logs/ci-etcd-chaosbench-nightly/1001/artifacts/suite/smoke/timeseries.jsonl"},
			0, "ok", 0, 1, []string{"HTTP 500"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			endpoint := "http://127.0.0.1:1" // nothing listens there
			if tc.gcs != nil {
				tc.gcs.Name = "kubernetes-ci-logs"
				srv := httptest.NewServer(tc.gcs)
				defer srv.Close()
				endpoint = srv.URL
			}
			artifacts, calls := t.TempDir(), filepath.Join(t.TempDir(), "calls")
			cmd := exec.Command("bash", prowScript[len("ci/"):])
			cmd.Env = append(os.Environ(), "CHAOSBENCH="+fake, "ARTIFACTS="+artifacts, "JOB_NAME=ci-etcd-chaosbench-nightly",
				"BUILD_ID=1004", "GCS_ENDPOINT="+endpoint, "FAKE_CALLS="+calls, "FAKE_SUITE_EXIT="+strconv.Itoa(tc.suite),
				"FAKE_SUITE_SAYS="+tc.suiteSays, "FAKE_TREND_EXIT="+strconv.Itoa(tc.trend), "HISTORY=")
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			code := 0
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				code = exit.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tc.code {
				t.Errorf("exit code %d, want %d:\n%s", code, tc.code, out.String())
			}
			for _, s := range tc.says {
				if !strings.Contains(out.String(), s) {
					t.Errorf("the output does not say %q:\n%s", s, out.String())
				}
			}
			var nights []string
			for _, line := range strings.SplitAfter(out.String(), "\n") {
				if strings.HasPrefix(line, "trend night: ") {
					nights = append(nights, line)
				}
			}
			if got := strings.Join(nights, ""); got != tc.trendNight {
				t.Errorf("the trend was given:\n%s\nwant:\n%s\noutput:\n%s", got, tc.trendNight, out.String())
			}
			b, err := os.ReadFile(calls)
			if err != nil {
				t.Fatal(err)
			}
			suites := 0
			for _, c := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				if strings.HasPrefix(c, "suite ") {
					suites++
					if !strings.Contains(c, "--retry-harness") {
						t.Errorf("the suite runs without --retry-harness: %s", c)
					}
				}
			}
			if suites != 1 {
				t.Errorf("the suite ran %d times, want once (its harness errors are retried inside it, nothing else is):\n%s", suites, b)
			}
			if _, err := os.Stat(filepath.Join(artifacts, "junit_chaosbench.xml")); err != nil {
				t.Errorf("no JUnit for TestGrid: %v", err)
			}
		})
	}
}
