package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcd-chaosbench/chaosbench"
	"github.com/etcd-chaosbench/chaosbench/outcome"
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
	// A 50% regression of put p99 in two rounds is not something these variants produce: the gate passes.
	if code != outcome.ExitOK {
		t.Fatalf("exit %d:\n%s\n%s", code, stdout.String(), stderr.String())
	}
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
	if !ok || e.N != 2 || e.Verdict == "" {
		t.Errorf("put p99: %+v", e)
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
	if code != outcome.ExitUsage || !strings.Contains(stderr.String(), `no figure "create/pods:p99"`) {
		t.Errorf("gate on a missing figure: exit %d: %s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "| 2 rounds |") {
		t.Errorf("report did not pair the rounds:\n%s", stdout.String())
	}
}
