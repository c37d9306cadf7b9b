package ci

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// fakeGCS serves objects as GCS's JSON API does (storage/v1/b/BUCKET/o: listings by prefix, with a
// delimiter, two entries a page; o/NAME?alt=media: an object), or fails as told: refuse answers 403
// everywhere, garbage answers listings with HTML, broken names an object that answers 500.
type fakeGCS struct {
	bucket  string
	objects map[string]string
	refuse  bool
	garbage bool
	broken  string
}

func (g *fakeGCS) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if g.refuse {
		http.Error(w, "Anonymous caller does not have storage.objects.list access", http.StatusForbidden)
		return
	}
	base := "/storage/v1/b/" + g.bucket + "/o"
	path := r.URL.EscapedPath()
	if name, ok := strings.CutPrefix(path, base+"/"); ok {
		name, err := url.PathUnescape(name)
		body, found := g.objects[name]
		switch {
		case err != nil || r.URL.Query().Get("alt") != "media" || !found:
			http.NotFound(w, r)
		case name == g.broken:
			http.Error(w, "backend error", http.StatusInternalServerError)
		default:
			w.Write([]byte(body))
		}
		return
	}
	if path != base {
		http.NotFound(w, r)
		return
	}
	if g.garbage {
		w.Write([]byte("<html>sign in</html>"))
		return
	}
	q := r.URL.Query()
	prefix, delim := q.Get("prefix"), q.Get("delimiter")
	type entry struct{ name, prefix string }
	var entries []entry
	seen := map[string]bool{}
	for _, name := range slices.Sorted(maps.Keys(g.objects)) {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		if i := strings.Index(rest, delim); delim != "" && i >= 0 {
			p := prefix + rest[:i+1]
			if !seen[p] {
				seen[p] = true
				entries = append(entries, entry{prefix: p})
			}
			continue
		}
		entries = append(entries, entry{name: name})
	}
	from, _ := strconv.Atoi(q.Get("pageToken"))
	to := min(from+2, len(entries))
	page := map[string]any{"kind": "storage#objects"}
	var items []map[string]string
	var prefixes []string
	for _, e := range entries[from:to] {
		if e.prefix != "" {
			prefixes = append(prefixes, e.prefix)
		} else {
			items = append(items, map[string]string{"kind": "storage#object", "name": e.name, "bucket": g.bucket})
		}
	}
	if items != nil {
		page["items"] = items
	}
	if prefixes != nil {
		page["prefixes"] = prefixes
	}
	if to < len(entries) {
		page["nextPageToken"] = strconv.Itoa(to)
	}
	json.NewEncoder(w).Encode(page)
}

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
		gcs        *fakeGCS // nil: nothing answers
		suite      int      // the suite's exit code
		suiteSays  string
		trend      int // the trend's exit code
		code       int // the night's
		says       []string
		trendNight string // what the trend was given ("" : not run)
	}{
		{"ok", &fakeGCS{objects: history()}, 0, "ok", 0, 0,
			[]string{"history: run 1002 has no suite.json (its suite did not finish): left out", "history: 2 previous nights fetched"}, fetched},
		{"a known issue passes", &fakeGCS{objects: history()}, 0, "known-issue: etcd-io/etcd#18424", 0, 0,
			[]string{"suite: known-issue"}, fetched},
		{"a violation fails, run once", &fakeGCS{objects: history()}, 4, "violation", 0, 4, nil, fetched},
		{"a crashed member fails, run once", &fakeGCS{objects: history()}, 4, "member-crashed", 3, 4, nil, fetched},
		{"a regression fails", &fakeGCS{objects: history()}, 0, "ok", 3, 3, nil, fetched},
		{"the first night", &fakeGCS{objects: map[string]string{}}, 0, "ok", 0, 0,
			[]string{"history: no previous runs in gs://kubernetes-ci-logs/logs/ci-etcd-chaosbench-nightly (the job's first night?)"}, "trend night: tonight\n"},
		{"unreachable", nil, 0, "ok", 0, 1,
			[]string{"FAIL: cannot fetch the previous nights from gs://kubernetes-ci-logs/logs/ci-etcd-chaosbench-nightly: ", "FAIL: the trend was not judged"}, ""},
		{"unreachable after a violation", nil, 4, "violation", 0, 4, []string{"FAIL: the trend was not judged"}, ""},
		{"refused", &fakeGCS{objects: history(), refuse: true}, 0, "ok", 0, 1, []string{"HTTP 403"}, ""},
		{"not GCS", &fakeGCS{objects: history(), garbage: true}, 0, "ok", 0, 1, []string{"not a GCS object listing"}, ""},
		{"an object fails", &fakeGCS{objects: history(), broken: "logs/ci-etcd-chaosbench-nightly/1001/artifacts/suite/smoke/timeseries.jsonl"},
			0, "ok", 0, 1, []string{"HTTP 500"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			endpoint := "http://127.0.0.1:1" // nothing listens there
			if tc.gcs != nil {
				tc.gcs.bucket = "kubernetes-ci-logs"
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
