package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters/slowfs"
	"github.com/etcd-chaosbench/chaosbench/internal/testenv"
	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/compare"
	"github.com/etcd-chaosbench/chaosbench/results/trend"
)

// TestTrend: five nights made of five real short runs (stamped a day apart, so that their spread is this
// machine's real run-to-run noise), then a real run of the same settings whose member's data sits on a
// disk with 20 ms fsyncs. The trend flags the slow night, names put, and with --fail-on-regression exits 3;
// the same five nights followed by a sixth normal run flag nothing and exit 0. Every run's data is on tmpfs
// where there is one (the slow night's under slowfs on it), so that the nights differ by the machine's noise
// and the slow disk alone, not by a real disk's stalls: on a CI machine one 6-second normal run met a stall
// that put backend commit p99 19 times above the other nights, and the trend rightly flagged it.
func TestTrend(t *testing.T) {
	if err := slowfs.Available(); err != nil {
		testenv.Missing(t, testenv.FUSE, "needs FUSE to slow a member's disk: %v", err)
	}
	base := fastDir(t)
	load := []string{"--members", "1", "--workload", "put", "--rate", "100", "--duration", "6s", "--faults", "none"}
	history := filepath.Join(base, "history")
	for i := range 5 {
		dir := filepath.Join(base, fmt.Sprintf("normal-%d", i+1))
		mustRun(t, append([]string{"run", "--out", dir, "--seed", fmt.Sprint(100 + i)}, load...))
		copyRun(t, dir, filepath.Join(history, fmt.Sprintf("night-%d", i+1)), func(s *results.Summary) { s.Start = nightStart(i) })
	}
	again := filepath.Join(base, "again")
	mustRun(t, append([]string{"run", "--out", again, "--seed", "12"}, load...))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fs, err := slowfs.Mount(ctx, slowfs.Options{Command: []string{binary, slowfs.Command}, Lower: filepath.Join(fastDir(t), "lower"),
		Mountpoint: filepath.Join(fastDir(t), "mnt"), Seed: 1, Log: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close(context.Background())
	if err := fs.Set(ctx, slowfs.Delays{Fsync: 20 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	slow := filepath.Join(base, "slow")
	// The member's data directory is a link onto the slow disk, as qualify --data-root lays it out.
	if err := os.MkdirAll(slow, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(fs.Mountpoint(), filepath.Join(slow, "members")); err != nil {
		t.Fatal(err)
	}
	mustRun(t, append([]string{"run", "--out", slow, "--seed", "13"}, load...))

	for _, tc := range []struct {
		name, latest string
		flagged      bool
	}{
		{"slow disk", slow, true},
		{"normal", again, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The latest night is the newest: stamp it a day after the synthetic ones.
			latest := filepath.Join(t.TempDir(), "latest")
			copyRun(t, tc.latest, latest, func(s *results.Summary) { s.Start = nightStart(5) })
			out := filepath.Join(t.TempDir(), "trend")
			cmd := exec.Command(binary, "trend", "--out", out, "--fail-on-regression", history, latest)
			b, err := cmd.CombinedOutput()
			t.Logf("%s", b)
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			tr := readTrend(t, out)
			if len(tr.Nights) != 6 || len(tr.Scenarios) != 1 {
				t.Fatalf("%d nights, %d scenarios: want 6 and 1", len(tr.Nights), len(tr.Scenarios))
			}
			sc := tr.Scenarios[0]
			if !tc.flagged {
				if code != outcome.ExitOK || len(sc.Regressions) > 0 || strings.Contains(string(b), "regression: put") {
					t.Fatalf("exit %d, regressions %v: a normal night must flag nothing", code, sc.Regressions)
				}
				return
			}
			if code != outcome.ExitThresholds || !strings.Contains(string(b), "regression: put put:p50 +") {
				t.Fatalf("exit %d: want 3 and a regression naming put:p50", code)
			}
			e, _ := sc.Latest.Find(tr.Nights[5].Label, "put:p50")
			if e.Verdict != compare.Worse || !(e.Low > 1) || e.Method != compare.MethodNights || e.N != 5 {
				t.Fatalf("put p50: %s (method %q, n %d): want worse by more than 100%%, from 5 nights", e, e.Method, e.N)
			}
			for _, f := range []string{"trend.md", "trend.html", "trend.json"} {
				if _, err := os.Stat(filepath.Join(out, f)); err != nil {
					t.Error(err)
				}
			}
			md, _ := os.ReadFile(filepath.Join(out, "trend.md"))
			if !strings.HasPrefix(string(md), "# chaosbench trend: **FAIL** — outcome threshold-failed (exit code 3); regression in put") {
				t.Errorf("trend.md headline:\n%.300s", md)
			}
		})
	}
}

// TestTrendBadInput: no night, a file instead of a directory, and a gate on a figure no scenario has are
// one line each and exit 2.
func TestTrendBadInput(t *testing.T) {
	empty := t.TempDir()
	file := filepath.Join(empty, "f")
	os.WriteFile(file, []byte("x"), 0o644)
	run := filepath.Join(t.TempDir(), "night")
	if err := os.MkdirAll(run, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := results.WriteSummary(run, &results.Summary{Schema: results.SummarySchema, Name: "run", Start: nightStart(0),
		Outcome: outcome.OK, Operations: map[string]*results.Operation{"put": {Count: 600, Throughput: 100,
			Response: results.Latency{P50: 1, P99: 3, P999: 5}}}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{empty}, "holds no suite.json or summary.json"},
		{[]string{file}, "is not a directory"},
		{[]string{"--fail-on-regression=nosuch:p99", run}, `no figure "nosuch:p99"`},
		{[]string{"--min-effect", "120", run}, "--min-effect"},
	} {
		out := filepath.Join(t.TempDir(), "trend")
		cmd := exec.Command(binary, append([]string{"trend", "--out", out}, tc.args...)...)
		b, err := cmd.CombinedOutput()
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != outcome.ExitUsage || !strings.Contains(string(b), tc.want) || strings.Count(strings.TrimSpace(string(b)), "\n") > 0 {
			t.Errorf("trend %v: %v\n%s\nwant exit 2 and one line with %q", tc.args, err, b, tc.want)
		}
		if _, err := os.Stat(out); err == nil {
			t.Errorf("trend %v wrote %s", tc.args, out)
		}
	}
}

func mustRun(t *testing.T, args []string) {
	t.Helper()
	if b, err := exec.Command(binary, args...).CombinedOutput(); err != nil {
		t.Fatalf("chaosbench %s: %v\n%s", strings.Join(args, " "), err, b)
	}
}

// nightStart is the start of night i of a trend test, one day apart.
func nightStart(i int) time.Time {
	return time.Date(2026, 11, 10+i, 2, 0, 0, 0, time.UTC)
}

// copyRun copies a run directory's summary (edited by edit) into dst; the time series is left out, so
// that the synthetic nights' figures are the summaries'.
func copyRun(t *testing.T, src, dst string, edit func(*results.Summary)) {
	t.Helper()
	s, err := results.ReadSummary(src)
	if err != nil {
		t.Fatal(err)
	}
	edit(s)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := results.WriteSummary(dst, s); err != nil {
		t.Fatal(err)
	}
}

func readTrend(t *testing.T, dir string) *trend.Trend {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, trend.File))
	if err != nil {
		t.Fatal(err)
	}
	var tr trend.Trend
	if err := json.Unmarshal(b, &tr); err != nil {
		t.Fatal(err)
	}
	return &tr
}
