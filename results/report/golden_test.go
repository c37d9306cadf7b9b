package report

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"flag"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/metrics"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata from the current output")

// golden compares got with testdata/name, or rewrites the file with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./report -run %s -update to create it)", err, t.Name())
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file; if the change is intended, run go test ./report -run %s -update\n%s",
			name, t.Name(), firstDifference(string(want), string(got)))
	}
}

func firstDifference(want, got string) string {
	wl, gl := bytes.Split([]byte(want), []byte("\n")), bytes.Split([]byte(got), []byte("\n"))
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g []byte
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if !bytes.Equal(w, g) {
			return "line " + strconv.Itoa(i+1) + ":\nwant: " + string(w) + "\ngot:  " + string(g)
		}
	}
	return ""
}

// fixtureRun copies testdata/run-faults, a real run (3 members, 150 puts/s for 14 s; one follower's
// fdatasync delayed 40 ms by strace for 5 s, then the leader paused for 2 s), into a temporary directory.
func fixtureRun(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "run-faults")
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("testdata", "run-faults"))); err != nil {
		t.Fatal(err)
	}
	name := "history.bin"
	gz, err := os.Open(filepath.Join(dir, name+".gz"))
	if err != nil {
		name = "history.jsonl" // a run before the binary format
		if gz, err = os.Open(filepath.Join(dir, name+".gz")); err != nil {
			t.Fatal(err)
		}
	}
	defer gz.Close()
	zr, err := gzip.NewReader(gz)
	if err != nil {
		t.Fatal(err)
	}
	out, err := os.Create(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, zr); err != nil {
		t.Fatal(err)
	}
	out.Close()
	return dir
}

func loadFixture(t *testing.T) *Run {
	t.Helper()
	r, err := Load(fixtureRun(t))
	if err != nil {
		t.Fatal(err)
	}
	ts, err := results.RunThresholds(results.StoredThresholds(r.Summary))
	if err != nil {
		t.Fatal(err)
	}
	Prepare(r, ts)
	return r
}

func TestGoldenReport(t *testing.T) {
	r := loadFixture(t)
	for _, f := range []struct {
		golden string
		write  func(io.Writer, *Run) error
	}{
		{"run-faults.report.md", WriteMarkdown},
		{"run-faults.junit.xml", WriteJUnit},
		{"run-faults.perfdash.json", WritePerfdash},
	} {
		var buf bytes.Buffer
		if err := f.write(&buf, r); err != nil {
			t.Fatal(err)
		}
		golden(t, f.golden, buf.Bytes())
	}
}

// TestGoldenSummary builds summary.json from fixed inputs through the code paths a run uses: records folded
// by the collector, recorded etcd expositions replayed by the metrics package, faults and checks as their
// packages write them, thresholds and diagnosis from this package.
func TestGoldenSummary(t *testing.T) {
	base := time.Date(2026, 5, 4, 12, 0, 0, 0, time.UTC)
	c, err := results.NewCollector(results.CollectorOptions{Start: base})
	if err != nil {
		t.Fatal(err)
	}
	c.Begin(0)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		op := "put"
		if i%3 == 0 {
			op = "range"
		}
		intended := time.Duration(i) * 3 * time.Millisecond
		start := intended
		if i%50 == 0 {
			start += 20 * time.Millisecond // a late start
		}
		rec := results.Record{Op: op, Intended: intended, Start: start, End: start + time.Duration(500+rng.IntN(20000))*time.Microsecond}
		if i%97 == 0 {
			rec.End = start + 80*time.Millisecond
		}
		if i%500 == 7 {
			rec.Outcome, rec.ErrClass = results.Error, "deadline"
		}
		if i%50 == 0 {
			rec.Miss = results.Backlog
		}
		c.Record(i%4, &rec)
	}
	measured := 9 * time.Second
	if err := c.Close(measured); err != nil {
		t.Fatal(err)
	}

	var exps []metrics.Exposition
	for i, f := range []string{"m1-scrape0.prom", "m2-scrape0.prom", "m1-scrape1.prom", "m2-scrape1.prom"} {
		b, err := os.ReadFile(filepath.Join("..", "metrics", "testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		exps = append(exps, metrics.Exposition{Member: f[:2], T: time.Duration(i/2) * measured, Measuring: i >= 2, Body: b})
	}
	exps = append(exps, metrics.Exposition{Member: "m3", T: measured, Measuring: true}) // a member that did not answer
	server, _, err := metrics.Replay(time.Second, exps)
	if err != nil {
		t.Fatal(err)
	}

	s := &results.Summary{
		Schema: results.SummarySchema, Name: "golden", Command: []string{"chaosbench", "run", "--threshold", "etcd-hardware"},
		Seed:     42,
		Versions: results.Versions{Chaosbench: "v0.0.0-test", EtcdClient: "3.6.16", EtcdServer: "3.6.16", Go: "go1.26"},
		Cluster:  results.ClusterInfo{Backend: "embed", Members: 3, Endpoints: []string{"http://127.0.0.1:2379"}, EtcdFlags: []string{"heartbeat-interval=50"}},
		Config:   json.RawMessage(`{"rate":1000,"threshold":["etcd-hardware","put:p99<25ms","errors<0.1%","availability_gap:max<3s"]}`),
		Start:    base.Add(-3 * time.Second), End: base.Add(11 * time.Second), DurationSeconds: 14, MeasuredSeconds: measured.Seconds(),
		Schedule:   results.Schedule{Mode: "open", TargetRate: 333.3, Clients: 64, Conns: 8},
		Operations: c.Operations(measured),
		Faults: []results.FaultWindow{{Fault: "kill", Targets: []string{"m1"}, Leader: "m1", Start: base.Add(4 * time.Second),
			End: base.Add(5 * time.Second), StartNs: 4e9, EndNs: 5e9, Outcome: "recovered"}},
		Checks:      []results.Check{{Name: "linearizability", Verdict: results.VerdictOK, Seconds: 1.5}},
		TimeBase:    base,
		Server:      server,
		Environment: &results.Environment{OS: "linux", Arch: "amd64", Kernel: "6.1.0", CPUModel: "test CPU", CPUs: 2, MemoryBytes: 24 << 30, RunDirFS: "ext4"},
	}
	s.Total = results.Totals(s.Operations)
	for _, op := range s.Operations {
		s.Schedule.MissedBacklog += op.MissedBacklog
		s.Schedule.MissedLag += op.MissedLag
	}
	s.Schedule.MissedPercent = 100 * float64(s.Schedule.MissedBacklog+s.Schedule.MissedLag) / float64(s.Total.Count)

	dir := t.TempDir()
	r, err := FromSummary(dir, s)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := results.RunThresholds([]string{"etcd-hardware", "put:p99<25ms", "errors<0.1%", "availability_gap:max<3s"})
	if err != nil {
		t.Fatal(err)
	}
	Prepare(r, ts)
	if err := results.WriteSummary(dir, s); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dir, results.SummaryFile))
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "summary.golden.json", got)
	// The summary reads back into the same report.
	back, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(back.Thresholds) != 7 || len(back.Summary.Server.Members) != 3 || len(back.Extra) != 0 {
		t.Fatalf("read back: %d thresholds, %d members, extra %v", len(back.Thresholds), len(back.Summary.Server.Members), back.Extra)
	}
}
