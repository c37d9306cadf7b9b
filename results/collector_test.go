package results

import (
	"bufio"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

func rec(op string, intended, start, end time.Duration) *Record {
	return &Record{Op: op, Intended: intended, Start: start, End: end}
}

// TestCollectorPercentiles records a known distribution and checks percentiles, counts, warm-up exclusion
// and the split between service and response time.
func TestCollectorPercentiles(t *testing.T) {
	c, err := NewCollector(CollectorOptions{Start: time.Now(), Warmup: time.Second, Stripes: 3})
	if err != nil {
		t.Fatal(err)
	}
	c.Begin(500 * time.Millisecond)
	// Warm-up: intended before 1.5 s, ignored.
	for i := range 100 {
		c.Record(i, rec("put", time.Second, time.Second, time.Second+time.Hour))
	}
	// 1..1000 ms service times, each started 10 ms late (response = service + 10 ms).
	for i := 1; i <= 1000; i++ {
		at := 2 * time.Second
		r := rec("put", at, at+10*time.Millisecond, at+10*time.Millisecond+time.Duration(i)*time.Millisecond)
		if i%100 == 0 {
			r.Outcome, r.ErrClass = Error, "deadline"
		}
		if i%250 == 0 {
			r.Miss = Backlog
		}
		c.Record(i, r)
	}
	if ops, errs := c.Live(); ops != 1000 || errs != 10 {
		t.Fatalf("Live() = %d, %d; want 1000, 10", ops, errs)
	}
	if err := c.Close(3 * time.Second); err != nil {
		t.Fatal(err)
	}
	op := c.Operations(2 * time.Second)["put"]
	if op.Count != 1000 || op.Errors != 10 || op.ErrorsByClass["deadline"] != 10 || op.MissedBacklog != 4 {
		t.Fatalf("counts %+v", op)
	}
	if op.Throughput != 500 {
		t.Fatalf("throughput %v, want 1000 ops / 2 s", op.Throughput)
	}
	near := func(got, want float64) bool { return math.Abs(got-want) <= want*0.002+0.01 }
	for _, tt := range []struct {
		name      string
		got, want float64
	}{
		{"service p50", op.Service.P50, 500}, {"service p90", op.Service.P90, 900}, {"service p99", op.Service.P99, 990},
		{"service max", op.Service.Max, 1000}, {"service min", op.Service.Min, 1},
		{"response p50", op.Response.P50, 510}, {"response p99", op.Response.P99, 1000}, {"response max", op.Response.Max, 1010},
	} {
		if !near(tt.got, tt.want) {
			t.Errorf("%s = %v ms, want %v (3 significant figures)", tt.name, tt.got, tt.want)
		}
	}
}

func TestCollectorClampsLongLatencies(t *testing.T) {
	c, _ := NewCollector(CollectorOptions{})
	c.Begin(0)
	c.Record(0, rec("get", 0, 0, 5*time.Minute))
	c.Record(0, rec("get", 0, 0, -time.Millisecond)) // clock oddities never panic
	c.Close(time.Second)
	op := c.Operations(time.Second)["get"]
	if op.Count != 2 || op.Service.Max < 59_900 {
		t.Fatalf("latency beyond 60 s must be counted at the histogram's maximum: %+v", op.Service)
	}
}

// TestCollectorFiles checks the interval log (read back with hdrhistogram's own reader), the time series
// (with the operation's access, for availability gaps without a history) and the .hgrm files, which stay
// out of the top of the run directory.
func TestCollectorFiles(t *testing.T) {
	dir := t.TempDir()
	start := time.Now()
	c, err := NewCollector(CollectorOptions{Dir: dir, Start: start, Interval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	c.Begin(0)
	for i := range 3 {
		base := time.Duration(i) * 100 * time.Millisecond
		for j := 1; j <= 10*(i+1); j++ {
			r := rec("create/pods", base+time.Millisecond, base+time.Millisecond, base+time.Millisecond+time.Duration(j)*time.Millisecond)
			r.Access = AccessWrite
			c.Record(j, r)
		}
		c.tick(base+100*time.Millisecond, true)
	}
	if err := c.Close(300 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteHGRM(dir); err != nil {
		t.Fatal(err)
	}

	f, err := os.Open(filepath.Join(dir, LatencyLogFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	reader := hdr.NewHistogramLogReader(f)
	var counts []int64
	for {
		h, err := reader.NextIntervalHistogram()
		if err != nil {
			t.Fatal(err)
		}
		if h == nil {
			break
		}
		if h.Tag() == "create/pods.response" {
			counts = append(counts, h.TotalCount())
		}
	}
	if len(counts) != 3 || counts[0] != 10 || counts[1] != 20 || counts[2] != 30 {
		t.Fatalf("interval histograms hold %v, want [10 20 30]", counts)
	}

	ts, err := os.Open(filepath.Join(dir, TimeSeriesFile))
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	var rows []TimeSeriesRow
	sc := bufio.NewScanner(ts)
	for sc.Scan() {
		var r TimeSeriesRow
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r)
	}
	if len(rows) != 3 || rows[2].Count != 30 || math.Abs(rows[2].Throughput-300) > 1e-6 || rows[2].Max < 29.9 || rows[2].Access != "write" {
		t.Fatalf("time series %+v", rows)
	}
	op := c.Operations(300 * time.Millisecond)["create/pods"]
	if op.ThroughputPerSecond.Min != 100 || op.ThroughputPerSecond.Max != 300 {
		t.Fatalf("per-interval throughput %+v, want min 100 max 300", op.ThroughputPerSecond)
	}
	hgrm, err := os.ReadFile(filepath.Join(dir, HGRMDir, "create_pods.hgrm"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(hgrm), "Total count    =           60") {
		t.Fatalf("create_pods.hgrm:\n%s", hgrm)
	}
	if _, err := os.Stat(filepath.Join(dir, HGRMDir, "create_pods.service.hgrm")); err != nil {
		t.Fatal(err)
	}
	if top, _ := filepath.Glob(filepath.Join(dir, "*.hgrm")); len(top) > 0 {
		t.Fatalf("percentile files at the top of the run directory: %v", top)
	}
}

func TestSummaryRoundTripAndText(t *testing.T) {
	dir := t.TempDir()
	s := &Summary{
		Schema: SummarySchema, Name: "put", Seed: 42, Incomplete: true, IncompleteReason: "interrupted",
		Schedule:   Schedule{Mode: "open", TargetRate: 1000, MissedBacklog: 3},
		Operations: map[string]*Operation{"put": {Count: 10, Throughput: 5, Errors: 1, ErrorsByClass: map[string]int64{"no_leader": 1}, Response: Latency{P50: 1.5, P99: 1500}}},
	}
	s.Total = Totals(s.Operations)
	if err := WriteSummary(dir, s); err != nil {
		t.Fatal(err)
	}
	got, err := ReadSummary(dir)
	if err != nil {
		t.Fatal(err)
	}
	if got.Seed != 42 || got.Operations["put"].Response.P99 != 1500 || !got.Incomplete || got.Total.Count != 10 {
		t.Fatalf("round trip: %+v", got)
	}
	var b strings.Builder
	if err := WriteText(&b, got); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"put", "1.50ms", "1500ms", "1 (no_leader:1)", "INCOMPLETE: interrupted", "service time"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("text summary lacks %q:\n%s", want, b.String())
		}
	}
}

// BenchmarkCollectorRecord shows that recording allocates nothing: memory does not grow with run length.
func BenchmarkCollectorRecord(b *testing.B) {
	c, _ := NewCollector(CollectorOptions{})
	c.Begin(0)
	r := rec("put", time.Millisecond, time.Millisecond, 3*time.Millisecond)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			c.Record(1, r)
		}
	})
}
