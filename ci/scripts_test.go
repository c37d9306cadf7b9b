// Package ci_test tests the verdicts of the CI scripts (ci/judge.sh, and the nightly that calls it) against
// small fixtures in testdata: runs that must pass, and runs that must fail, including every way a summary
// can be unreadable. Nothing here starts etcd; every test takes seconds.
package ci_test

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// script runs a ci script with bash and returns its output and exit code; env is added to the environment.
func script(t *testing.T, env []string, name string, args ...string) (string, int) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash not found: %v", err)
	}
	cmd := exec.Command(bash, append([]string{name}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return out.String(), 0
	case errors.As(err, &exit):
		return out.String(), exit.ExitCode()
	}
	t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
	return "", 0
}

// judge runs ci/judge.sh; the scripts need python3, and without it every verdict is a failure.
func judge(t *testing.T, args ...string) (string, int) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Fatalf("python3 not found: ci/judge.sh (and so the nightly and the benchmarks) need it")
	}
	return script(t, nil, "judge.sh", args...)
}

// TestNightlyVerdict: one job's verdict read from the outcome chaosbench wrote (summary.json, compare.json,
// suite.json) and its exit code. Green is ok or known issues only; the judge's exit code is the written
// outcome's (0 ok and known-issue, 1 undecided and harness-error, 3 threshold-failed, 4 violation and
// member-crashed, 130 incomplete). Nothing is decided again: a summary whose other fields contradict its
// outcome is read as its outcome says (the one judge, results.Decide, is tested where it decides). What
// cannot be read, or an exit code that contradicts the outcome, is red and never exits 0.
func TestNightlyVerdict(t *testing.T) {
	tests := []struct {
		fixture string
		code    int
		green   bool
		exit    int      // the judge's exit code
		says    []string // in the verdict line
	}{
		{"ok", 0, true, 0, []string{"seed 8974512365478512369", "outcome ok"}},
		{"ok-errors-empty", 0, true, 0, []string{"outcome ok"}},
		{"known-issue", 0, true, 0, []string{"outcome known-issue", "known-issue: linearizability: known issue etcd-io/etcd#18424", "evidence: 2 attempts"}},
		{"threshold-failed", 3, false, 3, []string{"outcome threshold-failed", "threshold-failed: threshold put:p99<1s failed"}},
		{"undecided", 1, false, 1, []string{"outcome undecided", "could not decide"}},
		{"harness-error", 1, false, 1, []string{"outcome harness-error", "member m2 (pid 4242) exited unexpectedly"}},
		{"incomplete", 130, false, 130, []string{"outcome incomplete", "interrupted by signal"}},
		{"member-crashed", 4, false, 4, []string{"outcome member-crashed", "member m1 crashed (exit status 2)", "panic: runtime error"}},
		{"violation", 4, false, 4, []string{"outcome violation", "violation: linearizability: put /k=3", "harness-error: workload put"}},
		{"outcome-without-reasons", 1, false, 1, []string{"outcome harness-error"}},
		// Other jobs' outcomes are read the same way.
		{"compare.json", 4, false, 4, []string{"seed -", "outcome violation", "violation: v3.6.16, round 2: linearizability"}},
		{"suite.json", 0, true, 0, []string{"outcome known-issue", "smoke-kill: linearizability: known issue"}},
		// Not decided again: what the outcome says stands, whatever else the summary holds.
		{"errors", 0, true, 0, []string{"outcome ok"}},
		{"ok-check-unknown", 0, true, 0, []string{"outcome ok"}},
		{"ok-fault-not-recovered", 0, true, 0, []string{"outcome ok"}},
		{"ok-incomplete", 0, true, 0, []string{"outcome ok"}},
		// An exit code that contradicts the written outcome: red, the outcome's code, never 0.
		{"ok", 1, false, 1, []string{"exit code 1, but the written outcome ok is exit code 0"}},
		{"ok", 130, false, 1, []string{"exit code 130, but the written outcome ok is exit code 0"}},
		{"undecided", 0, false, 1, []string{"outcome undecided", "exit code 0, but the written outcome undecided is exit code 1"}},
		{"violation", 0, false, 4, []string{"outcome violation", "exit code 0, but the written outcome violation is exit code 4"}},
		{"threshold-failed", 4, false, 3, []string{"exit code 4, but the written outcome threshold-failed is exit code 3"}},
		// What cannot be read: red, chaosbench's own exit code when it is one, else 1.
		{"no-outcome", 0, false, 1, []string{"outcome unknown", "has no outcome"}},
		{"outcome-null", 0, false, 1, []string{"has no outcome"}},
		{"outcome-unknown", 0, false, 1, []string{"unknown outcome 'passed'"}},
		{"reasons-unreadable", 1, false, 1, []string{"reasons unreadable"}},
		{"not-an-object", 0, false, 1, []string{"not an object"}},
		{"truncated", 0, false, 1, []string{"summary.json unreadable"}},
		{"empty", 0, false, 1, []string{"summary.json unreadable"}},
		{"missing", 0, false, 1, []string{"no summary.json"}},
		{"missing", 4, false, 4, []string{"no summary.json", "exit code 4"}},
		{"missing", 2, false, 2, []string{"no summary.json", "exit code 2"}},
		{"missing", 137, false, 1, []string{"no summary.json", "exit code 137"}},
	}
	for _, tc := range tests {
		t.Run(tc.fixture+"/exit-"+strconv.Itoa(tc.code), func(t *testing.T) {
			t.Parallel()
			// A run's summary is read as summary.json (the name the judge's messages use); other jobs'
			// files under their own names.
			path := filepath.Join("testdata", "run", tc.fixture)
			if !strings.HasSuffix(tc.fixture, ".json") {
				path = filepath.Join(t.TempDir(), "summary.json")
				if b, err := os.ReadFile(filepath.Join("testdata", "run", tc.fixture+".json")); err == nil {
					if err := os.WriteFile(path, b, 0o644); err != nil {
						t.Fatal(err)
					}
				} else if tc.fixture != "missing" {
					t.Fatal(err)
				}
			}
			for _, cmd := range []string{"run", "outcome"} {
				out, code := judge(t, cmd, tc.fixture, path, strconv.Itoa(tc.code))
				lines := strings.Split(strings.TrimSpace(out), "\n")
				if len(lines) != 1 {
					t.Fatalf("want one line, got:\n%s", out)
				}
				word := strings.Fields(lines[0])[0]
				if code != tc.exit || tc.green != (word == "green") || (!tc.green && word != "red") {
					t.Errorf("%s: green %v and exit %d wanted; judge exit code %d, line %q", cmd, tc.green, tc.exit, code, lines[0])
				}
				for _, s := range tc.says {
					if !strings.Contains(lines[0], s) {
						t.Errorf("%s: line does not say %q: %s", cmd, s, lines[0])
					}
				}
			}
		})
	}
}

// TestNightlyWithoutPython: without python3 nothing is read, so every run is red, and never exits 0.
func TestNightlyWithoutPython(t *testing.T) {
	for _, tc := range []struct {
		code, exit int
	}{{0, 1}, {4, 4}} {
		out, code := script(t, []string{"PATH=" + t.TempDir()}, "judge.sh", "run", "ok", "testdata/run/ok.json", strconv.Itoa(tc.code))
		if code != tc.exit || !strings.HasPrefix(out, "red ") || !strings.Contains(out, "python3 not found") {
			t.Errorf("chaosbench exit %d: judge exit code %d, output %q: want red, python3 not found, exit %d", tc.code, code, out, tc.exit)
		}
	}
}

// TestNightly: the nightly script, with a stand-in for chaosbench, prints one line per scenario and fails
// unless every one is green.
func TestNightly(t *testing.T) {
	fake, err := filepath.Abs("testdata/nightly/fake-chaosbench.sh")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		scenarios []string
		pass      bool
		lines     []string // prefixes of the final lines, one per scenario
	}{
		{"all green", []string{"green", "green-too"}, true, []string{"green  green ", "green  green-too "}},
		{"known issue", []string{"green", "known-issue"}, true, []string{"green  green ", "green  known-issue "}},
		{"undecided with exit code 0", []string{"green", "undecided-exit-0"}, false, []string{"green  green ", "red    undecided-exit-0 "}},
		{"violation", []string{"violation", "green"}, false, []string{"red    violation ", "green  green "}},
		{"no summary", []string{"no-summary"}, false, []string{"red    no-summary "}},
		{"ok summary, exit code 1", []string{"ok-exit-1"}, false, []string{"red    ok-exit-1 "}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var args []string
			for _, s := range tc.scenarios {
				args = append(args, filepath.Join("ci", "testdata", "nightly", s+".yaml"))
			}
			out, code := script(t, []string{"CHAOSBENCH=" + fake, "OUT=" + t.TempDir()}, "nightly-chaos.sh", args...)
			if tc.pass != (code == 0) {
				t.Errorf("pass %v, exit code %d:\n%s", tc.pass, code, out)
			}
			_, tail, ok := strings.Cut(out, "=== nightly chaos: results in ")
			if !ok {
				t.Fatalf("no final summary:\n%s", out)
			}
			lines := strings.Split(strings.TrimSpace(tail), "\n")[1:]
			if len(lines) != len(tc.lines)+1 {
				t.Fatalf("want %d scenario lines and the verdict, got:\n%s", len(tc.lines), tail)
			}
			for i, prefix := range tc.lines {
				if !strings.HasPrefix(lines[i], prefix) {
					t.Errorf("line %d: want %q..., got %q", i, prefix, lines[i])
				}
			}
			if verdict := lines[len(lines)-1]; tc.pass != strings.HasPrefix(verdict, "PASS") {
				t.Errorf("pass %v, last line %q", tc.pass, verdict)
			}
		})
	}
}

// TestBenchKubeVerdict: make bench-kube prints the generator's figures (informational: each must be there
// and a number) and passes or fails on the run's outcome, which carries the bar as a threshold (missed<1%):
// its exit code is the outcome's.
func TestBenchKubeVerdict(t *testing.T) {
	tests := []struct {
		fixture string
		code    int // chaosbench's
		exit    int // the judge's
		says    string
	}{
		{"sustained", 0, 0, "PASS: outcome ok: the generator sustained the large preset on one core"},
		// Pinned to one CPU, the generator cannot use more: its cores are reported, its schedule decides.
		{"over-one-core", 0, 0, "(1.04 cores)"},
		{"late", 3, 3, "FAIL: outcome threshold-failed: the generator did not sustain the large preset on one core: threshold-failed: threshold missed<1% failed: observed 2.50%"},
		{"late", 0, 3, "exit code 0, but the written outcome threshold-failed is exit code 3"},
		{"sustained", 1, 1, "FAIL: outcome ok: the generator did not sustain the large preset on one core: exit code 1, but"},
		{"no-generator-load", 0, 1, "FAIL: cannot read the large preset's figures: summary.json has no generator_load.cpu_s"},
		{"no-missed-percent", 0, 1, "FAIL: cannot read the large preset's figures: summary.json has no schedule.missed_percent"},
		{"no-peak-rss", 0, 1, "FAIL: cannot read the large preset's figures: summary.json has no generator_load.max_rss_bytes"},
		{"cores-a-string", 0, 1, "generator_load.cores is not a number"},
		{"cores-null", 0, 1, "generator_load.cores is missing"},
		{"no-requests", 0, 1, "the generator sent no request"},
		{"missing", 0, 1, "FAIL: cannot read the large preset's figures: no summary.json"},
	}
	for _, tc := range tests {
		t.Run(tc.fixture+"/exit-"+strconv.Itoa(tc.code), func(t *testing.T) {
			t.Parallel()
			out, code := judge(t, "kube", "large", filepath.Join("testdata", "kube", tc.fixture+".json"), strconv.Itoa(tc.code))
			if code != tc.exit || !strings.Contains(out, tc.says) {
				t.Errorf("want exit %d and %q; exit code %d:\n%s", tc.exit, tc.says, code, out)
			}
			if (tc.exit == 0) == strings.Contains(out, "FAIL") {
				t.Errorf("exit %d, but the output says otherwise:\n%s", tc.exit, out)
			}
		})
	}
}

// TestBenchVsEtcdRound: a round's figures are read from what the tools leave behind; a figure that is
// missing or not a number fails the round, naming it; a chaosbench run that did not pass measured nothing
// comparable, and fails the round with its outcome's exit code.
func TestBenchVsEtcdRound(t *testing.T) {
	const etcdOut, cpu, summary = "etcd-benchmark.out", "cpu.txt", "chaosbench-summary.json"
	tests := []struct {
		name                      string
		etcdOut, etcdCPU, cb, cpu string
		code, exit                int
		says                      string
	}{
		{"no Requests/sec", "etcd-benchmark-failed.out", cpu, summary, cpu, 0, 1, "etcd benchmark Requests/sec is missing"},
		{"no etcd CPU", etcdOut, "cpu-empty.txt", summary, cpu, 0, 1, "etcd benchmark CPU time unreadable"},
		{"no generator load", etcdOut, cpu, "chaosbench-no-load.json", cpu, 0, 1, "chaosbench summary.json has no generator_load.cpu_s"},
		{"chaosbench CPU unreadable", etcdOut, cpu, summary, "cpu-garbage.txt", 0, 1, "chaosbench CPU time unreadable"},
		{"no summary", etcdOut, cpu, "missing.json", cpu, 0, 1, "chaosbench's run did not pass, so it measured nothing comparable: outcome unknown | no missing.json"},
		{"no CPU file", etcdOut, cpu, summary, "missing.txt", 0, 1, "chaosbench CPU time unreadable"},
		{"run did not pass", etcdOut, cpu, "chaosbench-harness-error.json", cpu, 1, 1,
			"chaosbench's run did not pass, so it measured nothing comparable: outcome harness-error | harness-error: workload put: etcdserver: request timed out"},
		{"exit code contradicts", etcdOut, cpu, summary, cpu, 4, 1,
			"chaosbench's run did not pass, so it measured nothing comparable: outcome ok | exit code 4, but the written outcome ok is exit code 0"},
	}
	dir := filepath.Join("testdata", "vs-etcd")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rows := filepath.Join(t.TempDir(), "rounds.csv")
			out, code := judge(t, "vs-etcd-round", rows, "3", "etcd-first", "50000", filepath.Join(dir, tc.etcdOut),
				filepath.Join(dir, tc.etcdCPU), filepath.Join(dir, tc.cb), filepath.Join(dir, tc.cpu), strconv.Itoa(tc.code))
			if code != tc.exit || !strings.Contains(out, "FAIL: round 3: "+tc.says) {
				t.Errorf("want exit %d saying %q; exit code %d:\n%s", tc.exit, tc.says, code, out)
			}
			if b, err := os.ReadFile(rows); err == nil && len(b) > 0 {
				t.Errorf("a failed round was recorded: %s", b)
			}
		})
	}

	// Two good rounds, one of each order, and the figures over them.
	rows := filepath.Join(t.TempDir(), "rounds.csv")
	for i, order := range []string{"etcd-first", "chaosbench-first"} {
		out, code := judge(t, "vs-etcd-round", rows, strconv.Itoa(i+1), order, "50000", filepath.Join(dir, etcdOut),
			filepath.Join(dir, cpu), filepath.Join(dir, summary), filepath.Join(dir, cpu), "0")
		want := "round " + strconv.Itoa(i+1) + " (" + strings.ReplaceAll(order, "-", " ") + "): etcd benchmark 13124.5 puts/s, " +
			"chaosbench 12442.3 puts/s, ratio 0.948; client CPU per put: etcd benchmark 50.0 us (whole process), " +
			"chaosbench 44.2 us (load alone), 50.0 us (whole process)"
		if code != 0 || strings.TrimSpace(out) != want {
			t.Fatalf("exit code %d:\n%s\nwant:\n%s", code, out, want)
		}
	}
	out, code := judge(t, "vs-etcd", rows)
	if code != 0 || !strings.Contains(out, "median ratio when chaosbench first: 0.948 over 1 rounds") || strings.Contains(out, "FAIL") {
		t.Errorf("exit code %d:\n%s", code, out)
	}
}

// TestBenchVsEtcdFigures: the figures over the rounds are informational: no statistics, no verdict, so a
// slower chaosbench exits 0 as a faster one does; only rounds that cannot be read fail.
func TestBenchVsEtcdFigures(t *testing.T) {
	tests := []struct {
		rows string
		pass bool
		says []string
	}{
		{"faster", true, []string{"over 15 rounds (informational", "median 1.055, from", "client CPU per put: chaosbench's load alone 0.88x"}},
		{"even", true, []string{"informational"}},
		{"slower", true, []string{"informational", "median 0.9"}},
		{"one-round", true, []string{"over 1 rounds", "median 0.500"}},
		{"empty", false, []string{"FAIL: no round was measured"}},
		{"bad-figure", false, []string{"FAIL: round line 2 cb_rps is missing"}},
		{"bad-order", false, []string{"FAIL: round line 2: order 'etcd-last'"}},
		{"zero-throughput", false, []string{"FAIL: round line 2 etcd_rps is 0.0"}},
		{"missing", false, []string{"FAIL: rounds unreadable"}},
	}
	for _, tc := range tests {
		t.Run(tc.rows, func(t *testing.T) {
			t.Parallel()
			out, code := judge(t, "vs-etcd", filepath.Join("testdata", "vs-etcd", tc.rows+".csv"))
			if tc.pass != (code == 0) {
				t.Errorf("pass %v, exit code %d:\n%s", tc.pass, code, out)
			}
			for _, s := range tc.says {
				if !strings.Contains(out, s) {
					t.Errorf("output does not say %q:\n%s", s, out)
				}
			}
			if tc.pass == strings.Contains(out, "FAIL") || strings.Contains(out, "PASS") || strings.Contains(out, "95%") || strings.Contains(out, "t = ") {
				t.Errorf("pass %v: the output judges or computes statistics:\n%s", tc.pass, out)
			}
		})
	}
}
