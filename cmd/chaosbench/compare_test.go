package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench"
	"github.com/etcd-chaosbench/chaosbench/clusters/slowfs"
	"github.com/etcd-chaosbench/chaosbench/internal/testenv"
	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results/compare"
)

// TestCompareRounds is the one real comparison: two flag sets of a one-member embedded cluster, two
// rounds of two seconds. The rounds run ABBA with a seed each, shared by the round's variants and stored;
// every figure has an effect from the paired rounds; `report` reads the same directories as rounds of
// two variants; a gate naming a figure the comparison lacks is a usage error.
func TestCompareRounds(t *testing.T) {
	if testing.Short() {
		t.Skip("runs etcd")
	}
	out := filepath.Join(t.TempDir(), "cmp")
	var stdout, stderr bytes.Buffer
	code := execute([]string{"compare", "--workload", "put", "--rate", "100", "--clients", "4", "--conns", "2", "--duration", "2s",
		"--faults", "none", "--members", "1", "--check=false", "--history=false", "--progress", "none",
		"--etcd-flag-set", "", "--etcd-flag-set", "snapshot-count=5000", "--rounds", "2", "--seed", "11",
		"--cooldown", "100ms", "--fail-on-regression=put:p99", "--min-effect", "50", "--out", out}, &stdout, &stderr)
	b, err := os.ReadFile(filepath.Join(out, chaosbench.ComparisonJSON))
	if err != nil {
		t.Fatal(err)
	}
	var cmp chaosbench.Comparison
	if err := json.Unmarshal(b, &cmp); err != nil {
		t.Fatal(err)
	}
	if len(cmp.Rounds) != 2 || cmp.Rounds[0].Seed != 11 || cmp.Rounds[1].Seed == 11 ||
		cmp.Rounds[0].Order[0] != cmp.Rounds[1].Order[1] {
		t.Errorf("rounds %+v", cmp.Rounds)
	}
	if len(cmp.Effects.Variants) != 1 || cmp.Effects.MinEffect != 0.5 {
		t.Fatalf("effects %+v", cmp.Effects)
	}
	e, ok := cmp.Effects.Find(cmp.Effects.Variants[0].Label, "put:p99")
	if !ok || e.N != 2 || e.Verdict == "" || !e.Gated {
		t.Errorf("put p99: %+v", e)
	}
	// A 50% regression of put p99 in two rounds is not something these variants produce, but two rounds
	// may not decide it: the gate then leaves the comparison undecided (exit 1), never a pass. The exit code
	// is compare.json's outcome's.
	want := outcome.OK
	if e.Verdict == compare.Undecided {
		want = outcome.Undecided
	}
	if cmp.Outcome != want || code != (outcome.Outcome{Kind: want}).ExitCode() {
		t.Fatalf("put:p99 %s: outcome %s %v, exit %d; want %s\n%s\n%s", e.Verdict, cmp.Outcome, cmp.Reasons, code, want, stdout.String(), stderr.String())
	}
	if page, err := os.ReadFile(filepath.Join(out, chaosbench.ComparisonHTML)); err != nil || !strings.Contains(string(page), "put:p99") {
		t.Errorf("compare.html: %v", err)
	}
	if !strings.Contains(stdout.String(), "change [95% interval]") {
		t.Errorf("the printed comparison has no effects:\n%s", stdout.String())
	}
	var dirs [2][]string
	for i, v := range cmp.Variants {
		for _, r := range v.Runs {
			dirs[i] = append(dirs[i], r.Dir)
		}
	}
	stdout.Reset()
	code = execute([]string{"report", "--out", filepath.Join(out, "report"), "--fail-on-regression=put:p99,create/pods:p99",
		strings.Join(dirs[0], ","), strings.Join(dirs[1], ",")}, &stdout, &stderr)
	if code != outcome.ExitUsage || !strings.Contains(stderr.String(), `no figure "create/pods:p99"`) || stdout.Len() != 0 {
		t.Errorf("gate on a missing figure: exit %d, printed %q: %s", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	code = execute([]string{"report", "--out", filepath.Join(out, "report"), "--fail-on-regression=put:p99", "--min-effect", "50",
		strings.Join(dirs[0], ","), strings.Join(dirs[1], ",")}, &stdout, &stderr)
	if !strings.Contains(stdout.String(), "| 2 rounds |") {
		t.Errorf("report did not pair the rounds:\n%s", stdout.String())
	}
	// The same runs, gate and threshold: report A B decides as compare did.
	if code != (outcome.Outcome{Kind: want}).ExitCode() {
		t.Errorf("report A B: exit %d, compare: %s", code, want)
	}
}

// TestCompareRoundsAuto is one real comparison with --rounds auto: two settings that are the same
// configuration (heartbeat-interval=100 is etcd's default), gated on put's throughput, which an open-loop
// load keeps within a few percent: the sequential rule calls it no difference (its interval within ±10%)
// before the maximum of 6 rounds (at the first look, 3 rounds, on a quiet machine; 4 on the busy build
// machine), and the comparison stops at that round, saying so in its output and in compare.json, and
// passes. Six to eight runs of 2 s: about 25 s.
func TestCompareRoundsAuto(t *testing.T) {
	if testing.Short() {
		t.Skip("runs etcd")
	}
	out := filepath.Join(t.TempDir(), "cmp")
	var stdout, stderr bytes.Buffer
	code := execute([]string{"compare", "--workload", "put", "--rate", "100", "--clients", "4", "--conns", "2", "--duration", "2s",
		"--faults", "none", "--members", "1", "--check=false", "--history=false", "--progress", "none",
		"--etcd-flag-set", "", "--etcd-flag-set", "heartbeat-interval=100", "--seed", "12", "--max-rounds", "6",
		"--fail-on-regression=put:throughput", "--min-effect", "10", "--out", out}, &stdout, &stderr)
	b, err := os.ReadFile(filepath.Join(out, chaosbench.ComparisonJSON))
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, stdout.String(), stderr.String())
	}
	var cmp chaosbench.Comparison
	if err := json.Unmarshal(b, &cmp); err != nil {
		t.Fatal(err)
	}
	sq := cmp.Effects.Sequential
	if sq == nil || !sq.Stopped || sq.Rounds >= 6 || len(cmp.Rounds) != sq.Rounds || len(cmp.Variants[1].Runs) != sq.Rounds ||
		len(sq.Figures) != 1 || sq.Figures[0].DecidedAt != sq.Rounds {
		t.Fatalf("sequential %+v, rounds %d\n%s", sq, len(cmp.Rounds), stdout.String())
	}
	e, _ := cmp.Effects.Find(cmp.Effects.Variants[0].Label, "put:throughput")
	if e.Verdict != compare.NoDifference || e.Method != compare.MethodSequential || !e.Gated || e.Low <= -0.1 || e.High >= 0.1 {
		t.Errorf("put:throughput %+v", e)
	}
	if code != 0 || cmp.Outcome != outcome.OK {
		t.Errorf("exit %d, outcome %s %v", code, cmp.Outcome, cmp.Reasons)
	}
	why := fmt.Sprintf("stopped after %d rounds: every gated figure is decided (put:throughput no difference at round %d)", sq.Rounds, sq.Rounds)
	for _, want := range []string{"rounds auto (3 to 6, until decided)", fmt.Sprintf("rounds: --rounds auto (3 to 6 rounds): %d rounds; %s", sq.Rounds, why)} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, stdout.String())
		}
	}
	if !strings.Contains(cmp.Stopped, why) {
		t.Errorf("compare.json rounds_stopped %q", cmp.Stopped)
	}
}

// TestCompareSlowDiskWorse: two truly different configurations, four rounds each (three decide it on a
// quiet machine; a fourth keeps a busy one from leaving it undecided), the second with every fsync of its
// member's disk delayed by 5 ms (a FUSE disk under its data directory). A few clients at a
// modest rate keep the queue short, so that each write waits for its own fsync: the write median is "worse"
// with a 95% interval above zero, and --fail-on-regression=put:p50 exits 3 naming it. The median, not p99:
// every write pays the delay, while a busy CI machine's own stalls reach a 5-second run's p99 on both sides
// and leave four rounds undecided about it (as they should).
func TestCompareSlowDiskWorse(t *testing.T) {
	if err := slowfs.Available(); err != nil {
		testenv.Missing(t, testenv.FUSE, "needs FUSE to slow a member's disk: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	fs, err := slowfs.Mount(ctx, slowfs.Options{Command: []string{binary, slowfs.Command}, Lower: filepath.Join(fastDir(t), "lower"),
		Mountpoint: filepath.Join(fastDir(t), "mnt"), Seed: 1, Log: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close(context.Background())
	if err := fs.Set(ctx, slowfs.Delays{Fsync: 5 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	base := t.TempDir()
	load := []string{"--members", "1", "--workload", "put", "--rate", "150", "--clients", "4", "--conns", "1",
		"--duration", "3s", "--faults", "none", "--progress", "none"}
	var dirs [2][]string
	for r := range 4 {
		for v, name := range []string{"base", "slow"} {
			dir := filepath.Join(base, name, fmt.Sprintf("round-%d", r+1))
			if name == "slow" {
				// Each round's member data on the slow disk, as qualify --data-root lays it out.
				data := filepath.Join(fs.Mountpoint(), fmt.Sprintf("round-%d", r+1))
				if err := os.MkdirAll(data, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(data, filepath.Join(dir, "members")); err != nil {
					t.Fatal(err)
				}
			}
			mustRun(t, append([]string{"run", "--out", dir, "--seed", fmt.Sprint(100 + r)}, load...))
			dirs[v] = append(dirs[v], dir)
		}
	}
	cmd := exec.Command(binary, "report", "--out", filepath.Join(base, "cmp"), "--label", "base,slow",
		"--fail-on-regression=put:p50", strings.Join(dirs[0], ","), strings.Join(dirs[1], ","))
	b, err := cmd.CombinedOutput()
	t.Logf("%s", b)
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != outcome.ExitThresholds || !strings.Contains(string(b), "regression: slow put:p50 +") {
		t.Fatalf("report: %v, want exit 3 naming put:p50", err)
	}
	// The effect row: put:p50 worse, its interval above zero, from paired rounds.
	re := regexp.MustCompile(`put:p50 \|[^|]*\|[^|]*\| \+[0-9.]+% \[\+([0-9.]+)%, \+[0-9.]+%\] \| worse \| 4 rounds`)
	if m := re.FindStringSubmatch(string(b)); m == nil {
		t.Fatalf("no put:p50 row that is worse with an interval above zero from 4 rounds")
	}
}
