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

// TestNightlyVerdict: one scenario's verdict from its exit code and summary.json. Only a readable summary
// whose outcome is "ok", with nothing in it saying otherwise, and exit code 0 is green.
func TestNightlyVerdict(t *testing.T) {
	tests := []struct {
		fixture string
		code    int
		green   bool
		says    []string // in the verdict line
	}{
		{"ok", 0, true, []string{"seed 8974512365478512369", "outcome ok"}},
		{"ok-errors-empty", 0, true, []string{"outcome ok"}},
		{"ok", 1, false, []string{"exit code 1"}},
		{"ok", 130, false, []string{"exit code 130"}},
		{"errors", 0, false, []string{"1 errors: fault kill leader at 10s skipped"}},
		{"errors-not-a-list", 0, false, []string{"errors unreadable"}},
		{"no-outcome", 0, false, []string{"outcome unknown", "no outcome"}},
		{"outcome-null", 0, false, []string{"no outcome"}},
		{"outcome-unknown", 0, false, []string{"unknown outcome 'passed'"}},
		{"violation", 4, false, []string{"outcome violation", "violation: linearizability: put /k=3", "harness-error: workload put", "exit code 4"}},
		{"undecided", 1, false, []string{"outcome undecided", "could not decide"}},
		{"undecided", 0, false, []string{"outcome undecided"}},
		{"harness-error", 1, false, []string{"outcome harness-error", "member m2 (pid 4242) exited unexpectedly", "1 errors (among the reasons)"}},
		{"threshold-failed", 3, false, []string{"outcome threshold-failed", "thresholds failed: put:p99<1s"}},
		{"incomplete", 130, false, []string{"outcome incomplete", "interrupted by signal"}},
		{"outcome-without-reasons", 1, false, []string{"outcome harness-error without reasons"}},
		{"reasons-unreadable", 1, false, []string{"reasons unreadable"}},
		{"ok-with-reasons", 0, false, []string{"harness-error: compaction burst failed"}},
		{"ok-check-unknown", 0, false, []string{"checks: linearizability=unknown"}},
		{"ok-check-no-verdict", 0, false, []string{"checks: linearizability=missing"}},
		{"ok-fault-not-recovered", 0, false, []string{"1 fault windows not recovered"}},
		{"ok-incomplete", 0, false, []string{"incomplete: workload put: connection refused"}},
		{"not-an-object", 0, false, []string{"not an object"}},
		{"truncated", 0, false, []string{"summary.json unreadable"}},
		{"empty", 0, false, []string{"summary.json unreadable"}},
		{"missing", 0, false, []string{"no summary.json"}},
	}
	for _, tc := range tests {
		t.Run(tc.fixture+"/exit-"+strconv.Itoa(tc.code), func(t *testing.T) {
			t.Parallel()
			out, code := judge(t, "run", tc.fixture, filepath.Join("testdata", "run", tc.fixture+".json"), strconv.Itoa(tc.code))
			lines := strings.Split(strings.TrimSpace(out), "\n")
			if len(lines) != 1 {
				t.Fatalf("want one line, got:\n%s", out)
			}
			word := strings.Fields(lines[0])[0]
			if tc.green != (code == 0) || tc.green != (word == "green") || (!tc.green && word != "red") {
				t.Errorf("green %v: judge exit code %d, line %q", tc.green, code, lines[0])
			}
			for _, s := range tc.says {
				if !strings.Contains(lines[0], s) {
					t.Errorf("line does not say %q: %s", s, lines[0])
				}
			}
		})
	}
}

// TestNightlyWithoutPython: without python3 nothing is read, so every run is red.
func TestNightlyWithoutPython(t *testing.T) {
	out, code := script(t, []string{"PATH=" + t.TempDir()}, "judge.sh", "run", "ok", "testdata/run/ok.json", "0")
	if code == 0 || !strings.HasPrefix(out, "red ") || !strings.Contains(out, "python3 not found") {
		t.Errorf("exit code %d, output %q: want red, python3 not found", code, out)
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
		{"errors with exit code 0", []string{"green", "errors-exit-0"}, false, []string{"green  green ", "red    errors-exit-0 "}},
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

// TestBenchKubeVerdict: make bench-kube passes only when every figure it prints and judges is there and a
// number, the generator used under one core and missed under 1% of its slots.
func TestBenchKubeVerdict(t *testing.T) {
	tests := []struct {
		fixture string
		pass    bool
		says    string
	}{
		{"sustained", true, "PASS: the generator sustained the large preset on one core (0.16 cores used, 0.67% of slots late)"},
		{"over-one-core", false, "FAIL: the generator did not sustain the large preset on one core (1.04 cores used"},
		{"late", false, "FAIL: the generator did not sustain the large preset on one core (0.16 cores used, 2.50% of slots late)"},
		{"no-generator-load", false, "FAIL: cannot judge the large preset: summary.json has no generator_load.cpu_s"},
		{"no-missed-percent", false, "FAIL: cannot judge the large preset: summary.json has no schedule.missed_percent"},
		{"no-peak-rss", false, "FAIL: cannot judge the large preset: summary.json has no generator_load.max_rss_bytes"},
		{"cores-a-string", false, "generator_load.cores is not a number"},
		{"cores-null", false, "generator_load.cores is missing"},
		{"no-requests", false, "the generator sent no request"},
		{"missing", false, "FAIL: cannot judge the large preset: no summary.json"},
	}
	for _, tc := range tests {
		t.Run(tc.fixture, func(t *testing.T) {
			t.Parallel()
			out, code := judge(t, "kube", "large", filepath.Join("testdata", "kube", tc.fixture+".json"))
			if tc.pass != (code == 0) || !strings.Contains(out, tc.says) {
				t.Errorf("want pass %v and %q; exit code %d:\n%s", tc.pass, tc.says, code, out)
			}
			if tc.pass == strings.Contains(out, "FAIL") {
				t.Errorf("pass %v, but the output says otherwise:\n%s", tc.pass, out)
			}
		})
	}
}

// TestBenchVsEtcdRound: a round's figures are read from what the tools leave behind, and a figure that is
// missing or not a number fails the round, naming it.
func TestBenchVsEtcdRound(t *testing.T) {
	const etcdOut, cpu, summary = "etcd-benchmark.out", "cpu.txt", "chaosbench-summary.json"
	tests := []struct {
		name                      string
		etcdOut, etcdCPU, cb, cpu string
		says                      string
	}{
		{"no Requests/sec", "etcd-benchmark-failed.out", cpu, summary, cpu, "etcd benchmark Requests/sec is missing"},
		{"no etcd CPU", etcdOut, "cpu-empty.txt", summary, cpu, "etcd benchmark CPU time unreadable"},
		{"no generator load", etcdOut, cpu, "chaosbench-no-load.json", cpu, "chaosbench summary.json has no generator_load.cpu_s"},
		{"chaosbench CPU unreadable", etcdOut, cpu, summary, "cpu-garbage.txt", "chaosbench CPU time unreadable"},
		{"no summary", etcdOut, cpu, "missing.json", cpu, "no chaosbench summary.json"},
		{"no CPU file", etcdOut, cpu, summary, "missing.txt", "chaosbench CPU time unreadable"},
	}
	dir := filepath.Join("testdata", "vs-etcd")
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rows := filepath.Join(t.TempDir(), "rounds.csv")
			out, code := judge(t, "vs-etcd-round", rows, "3", "etcd-first", "50000", filepath.Join(dir, tc.etcdOut),
				filepath.Join(dir, tc.etcdCPU), filepath.Join(dir, tc.cb), filepath.Join(dir, tc.cpu))
			if code == 0 || !strings.Contains(out, "FAIL: round 3: "+tc.says) {
				t.Errorf("want a failure saying %q; exit code %d:\n%s", tc.says, code, out)
			}
			if b, err := os.ReadFile(rows); err == nil && len(b) > 0 {
				t.Errorf("a failed round was recorded: %s", b)
			}
		})
	}

	// Two good rounds, one of each order, and the verdict over them.
	rows := filepath.Join(t.TempDir(), "rounds.csv")
	for i, order := range []string{"etcd-first", "chaosbench-first"} {
		out, code := judge(t, "vs-etcd-round", rows, strconv.Itoa(i+1), order, "50000", filepath.Join(dir, etcdOut),
			filepath.Join(dir, cpu), filepath.Join(dir, summary), filepath.Join(dir, cpu))
		want := "round " + strconv.Itoa(i+1) + " (" + strings.ReplaceAll(order, "-", " ") + "): etcd benchmark 13124.5 puts/s, " +
			"chaosbench 12442.3 puts/s, ratio 0.948; client CPU per put: etcd benchmark 50.0 us (whole process), " +
			"chaosbench 44.2 us (load alone), 50.0 us (whole process)"
		if code != 0 || strings.TrimSpace(out) != want {
			t.Fatalf("exit code %d:\n%s\nwant:\n%s", code, out, want)
		}
	}
	out, code := judge(t, "vs-etcd", rows)
	if code == 0 || !strings.Contains(out, "mean ratio when chaosbench first: 0.948 over 1 rounds") ||
		!strings.Contains(out, "FAIL: chaosbench is slower") {
		t.Errorf("exit code %d:\n%s", code, out)
	}
}

// TestBenchVsEtcdVerdict: the verdict over the rounds' ratios, with the t quantile of their number.
func TestBenchVsEtcdVerdict(t *testing.T) {
	tests := []struct {
		rows string
		pass bool
		says []string
	}{
		{"faster", true, []string{"interval [1.033, 1.067] over 15 rounds (t = 2.145", "PASS: chaosbench, recording everything, is at least as fast",
			// The 4th and 12th of the 15 sorted ratios: P(Binomial(15, 1/2) <= 3) = 0.018.
			"median 1.055, 95% interval [1.018, 1.080]", "median ratio >= 1.10: not met (1.055)", "0.9x etcd's: met (0.88x"}},
		{"even", true, []string{"PASS: no measurable difference"}},
		{"slower", false, []string{"interval [0.883, 0.917]", "FAIL: chaosbench is slower"}},
		// t(0.975, 16) = 2.120 takes this interval's top to 1.001; the old table's 2.0 stopped at 0.999.
		{"seventeen-reaches-1", true, []string{"[0.939, 1.001] over 17 rounds (t = 2.120, 16 degrees of freedom)", "PASS: no measurable difference"}},
		{"seventeen-slower", false, []string{"(t = 2.120", "FAIL: chaosbench is slower"}},
		{"one-round", false, []string{"FAIL: cannot decide from 1 round(s)"}},
		{"empty", false, []string{"FAIL: cannot decide from 0 round(s)"}},
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
			if tc.pass == strings.Contains(out, "FAIL") {
				t.Errorf("pass %v, but the output says otherwise:\n%s", tc.pass, out)
			}
		})
	}
}

// TestT975 compares the t quantile with published values of t(0.975, df).
func TestT975(t *testing.T) {
	tests := []struct {
		n    int // samples; df = n - 1
		want float64
	}{
		{2, 12.706}, {3, 4.303}, {5, 2.776}, {10, 2.262}, {16, 2.131}, {17, 2.120}, {18, 2.110}, {20, 2.093},
		{25, 2.064}, {29, 2.048}, {30, 2.045}, {31, 2.042}, {41, 2.021}, {61, 2.000}, {100, 1.984},
		{121, 1.980}, {1001, 1.962},
	}
	args := []string{"t975"}
	for _, tc := range tests {
		args = append(args, strconv.Itoa(tc.n-1))
	}
	out, code := judge(t, args...)
	if code != 0 {
		t.Fatalf("exit code %d:\n%s", code, out)
	}
	got := strings.Fields(out)
	if len(got) != len(tests) {
		t.Fatalf("want %d values, got:\n%s", len(tests), out)
	}
	for i, tc := range tests {
		v, err := strconv.ParseFloat(got[i], 64)
		if err != nil {
			t.Fatalf("n=%d: %q: %v", tc.n, got[i], err)
		}
		if d := v - tc.want; d < -0.0006 || d > 0.0006 {
			t.Errorf("n=%d (df %d): t = %.4f, want %.3f", tc.n, tc.n-1, v, tc.want)
		}
	}
	for _, df := range []string{"0", "-1", "x", ""} {
		if out, code := judge(t, "t975", df); code == 0 {
			t.Errorf("df %q: exit code 0, output %q; want a failure", df, out)
		}
	}
}
