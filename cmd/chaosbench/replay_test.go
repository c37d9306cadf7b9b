package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// TestReplay: `run --replay DIR` runs a recorded run again with its seed and settings, into a new
// directory: the seeded fault schedule (jittered times, random targets) and each client's request plan
// (the keys it writes, in order) come out the same.
func TestReplay(t *testing.T) {
	// Not parallel: which client a free request slot goes to depends on timing, and the plan per client is
	// compared.
	tmp := t.TempDir()
	first, second := filepath.Join(tmp, "first"), filepath.Join(tmp, "replay")
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(binary, args...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("chaosbench %v: %v\n%s", args, err, out)
		}
	}
	run("run", "--workload", "put", "--rate", "100", "--clients", "4", "--conns", "2", "--duration", "6s", "--progress", "none",
		"--faults", "pause:random@1s~1500ms+1s,kill:random@3500ms~1s+1s", "--out", first)
	run("run", "--replay", first, "--out", second, "--progress", "none")

	a, err := results.ReadSummary(first)
	if err != nil {
		t.Fatal(err)
	}
	b, err := results.ReadSummary(second)
	if err != nil {
		t.Fatal(err)
	}
	if a.Seed != b.Seed || a.Seed == 0 {
		t.Fatalf("seeds %d and %d", a.Seed, b.Seed)
	}
	fa, fb := readFaults(t, first), readFaults(t, second)
	if len(fa) != 2 || len(fa) != len(fb) {
		t.Fatalf("fault windows: %d and %d", len(fa), len(fb))
	}
	for i := range fa {
		x, y := fa[i], fb[i]
		if x.Fault != y.Fault || x.Spec != y.Spec || !slices.Equal(x.Targets, y.Targets) {
			t.Errorf("window %d: %s %s %v, replayed as %s %s %v", i, x.Fault, x.Spec, x.Targets, y.Fault, y.Spec, y.Targets)
		}
		// The schedule's times are the same; when a fault starts also depends on a health check before it.
		if d := time.Duration(x.StartNS - y.StartNS); d.Abs() > 300*time.Millisecond {
			t.Errorf("window %d (%s): started at %v, replayed at %v", i, x.Spec, time.Duration(x.StartNS), time.Duration(y.StartNS))
		}
	}
	ka, kb := clientKeys(t, first), clientKeys(t, second)
	for c, keys := range ka {
		other := kb[c]
		n := min(len(keys), len(other))
		if n < 50 || !slices.Equal(keys[:n], other[:n]) {
			t.Errorf("client %d: %d keys, replayed %d; the first %d differ", c, len(keys), len(other), n)
		}
	}

	// Bad replays are usage errors that start nothing.
	for _, args := range [][]string{
		{"run", "--replay", tmp},
		{"run", "--replay", first, "--config", "ci/chaos/nemesis.yaml"},
	} {
		cmd := exec.Command(binary, args...)
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != outcome.ExitUsage {
			t.Errorf("%v: exit code %d, want %d\n%s", args, code, outcome.ExitUsage, out)
		}
	}
}

type faultLine struct {
	Fault   string   `json:"fault"`
	Spec    string   `json:"spec"`
	Targets []string `json:"targets"`
	StartNS int64    `json:"start_ns"`
}

// readFaults reads faults.jsonl in schedule order.
func readFaults(t *testing.T, dir string) []faultLine {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, results.FaultsFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []faultLine
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var l faultLine
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	slices.SortFunc(out, func(a, b faultLine) int { return int(a.StartNS - b.StartNS) })
	return out
}

// clientKeys returns the keys each client wrote, in the order it wrote them.
func clientKeys(t *testing.T, dir string) map[int][]string {
	t.Helper()
	path, err := history.HistoryPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int][]string{}
	err = history.ReadOperations(path, func(op *history.Operation) error {
		if p := op.Request.Put; p != nil {
			out[op.Client] = append(out[op.Client], p.Key)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
