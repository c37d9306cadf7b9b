package merge

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// worker writes a worker's run directory with a summary and a time series.
func worker(t *testing.T, dir string, i, of int, base time.Time, offset, uncertainty time.Duration, rows []results.TimeSeriesRow) string {
	t.Helper()
	d := filepath.Join(dir, "w"+string(rune('0'+i)))
	s := &results.Summary{Seed: 9, TimeBase: base, Split: &results.Split{Workers: of, Worker: i,
		Clock: &results.WorkerClock{OffsetNs: int64(offset), UncertaintyNs: int64(uncertainty)}}}
	if err := results.WriteSummary(mkdir(t, d), s); err != nil {
		t.Fatal(err)
	}
	if err := results.WriteTimeSeries(d, rows); err != nil {
		t.Fatal(err)
	}
	return d
}

func mkdir(t *testing.T, d string) string {
	t.Helper()
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	return d
}

// TestLoadPlacesWorkersOnOneTimeline: a worker whose time base is 1.5 s after worker 0's, and whose clock
// is 0.5 s behind the reference, is shifted by 2 s and widened by its uncertainty.
func TestLoadPlacesWorkersOnOneTimeline(t *testing.T) {
	dir := t.TempDir()
	base := time.Date(2026, 11, 24, 3, 0, 0, 0, time.UTC)
	w0 := worker(t, dir, 0, 2, base, 0, 40*time.Microsecond, nil)
	w1 := worker(t, dir, 1, 2, base.Add(1500*time.Millisecond), 500*time.Millisecond, 60*time.Microsecond, nil)
	set, err := Load([]string{w1, w0}, "", 0)
	ws, b := set.Workers, set.Base
	if err != nil || len(set.Warnings) != 0 || len(set.Missing) != 0 {
		t.Fatal(err, set.Warnings, set.Missing)
	}
	if b.Dir != w0 || ws[0].Dir != w0 || ws[1].ShiftNs != int64(2*time.Second) || ws[1].WidenNs != int64(60*time.Microsecond) || ws[0].ShiftNs != 0 {
		t.Fatalf("placed %+v", ws)
	}
}

// TestLoadRefusesBadSets: too few directories, a duplicate, another seed, and a clock not measured (widened
// by the assumed uncertainty, with a warning).
func TestLoadRefusesBadSets(t *testing.T) {
	dir := t.TempDir()
	base := time.Now()
	w0 := worker(t, dir, 0, 3, base, 0, time.Microsecond, nil)
	w1 := worker(t, dir, 1, 3, base, 0, time.Microsecond, nil)
	if _, err := Load([]string{w0, w1}, "", 0); !outcome.IsUsage(err) {
		t.Fatalf("2 of 3 workers: %v", err)
	}
	if _, err := Load([]string{w0, w1, w1}, "", 0); !outcome.IsUsage(err) {
		t.Fatalf("a worker twice: %v", err)
	}
	w2 := worker(t, dir, 2, 3, base, 0, -1, nil)
	set, err := Load([]string{w0, w1, w2}, "", 5*time.Millisecond)
	if err != nil || len(set.Warnings) != 1 || set.Workers[2].WidenNs != int64(5*time.Millisecond) {
		t.Fatalf("unmeasured clock: %v, %v, widened %d", err, set.Warnings, set.Workers[2].WidenNs)
	}
	s, _ := results.ReadSummary(w2)
	s.Seed = 10
	results.WriteSummary(w2, s)
	if _, err := Load([]string{w0, w1, w2}, "", 0); !outcome.IsUsage(err) {
		t.Fatalf("another seed: %v", err)
	}
}

// TestLoadMissingShares: a worker that left no results is a missing share, named, and the others are
// merged; without worker 0 (and no observer) there is nothing to merge onto; with no results at all, the
// directories are not a split's.
func TestLoadMissingShares(t *testing.T) {
	dir := t.TempDir()
	base := time.Now()
	w0 := worker(t, dir, 0, 3, base, 0, time.Microsecond, nil)
	w2 := worker(t, dir, 2, 3, base, 0, time.Microsecond, nil)
	gone := mkdir(t, filepath.Join(dir, "w1"))
	set, err := Load([]string{w0, gone, w2}, "", 0)
	if err != nil || len(set.Workers) != 2 || set.Workers[1].Summary.Split.Worker != 2 || set.Base.Dir != w0 {
		t.Fatalf("merged %+v: %v", set.Workers, err)
	}
	if len(set.Missing) != 1 || set.Missing[0] != "worker 1's share is missing: "+gone+" holds no summary.json" {
		t.Fatalf("missing %q", set.Missing)
	}
	never := filepath.Join(dir, "never")
	if set, err := Load([]string{w0, never, w2}, "", 0); err != nil || len(set.Missing) != 1 {
		t.Fatalf("a directory never made: %v %v", set.Missing, err)
	}
	if _, err := Load([]string{gone, never, w2}, "", 0); err == nil || outcome.IsUsage(err) || !strings.Contains(err.Error(), "worker 0 left no results") {
		t.Fatalf("without worker 0: %v", err)
	}
	if _, err := Load([]string{gone, never}, "", 0); !outcome.IsUsage(err) {
		t.Fatalf("no results at all: %v", err)
	}
}

// TestSeriesAddsCountsOnOneTimeline: rows of two workers land in the interval their shifted end falls in;
// counts add up exactly, latency columns keep the larger.
func TestSeriesAddsCountsOnOneTimeline(t *testing.T) {
	dir := t.TempDir()
	base := time.Now()
	w0 := worker(t, dir, 0, 2, base, 0, time.Microsecond, []results.TimeSeriesRow{
		{T: 1, Op: "put", Count: 100, Errors: 1, P99: 5}, {T: 2, Op: "put", Count: 110, P99: 6}})
	w1 := worker(t, dir, 1, 2, base.Add(300*time.Millisecond), 0, time.Microsecond, []results.TimeSeriesRow{
		{T: 1, Op: "put", Count: 90, P99: 9}, {T: 2, Op: "put", Count: 95, Errors: 2, P99: 4}})
	set, err := Load([]string{w0, w1}, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := Series(set.Workers)
	if err != nil {
		t.Fatal(err)
	}
	// w1's rows end at 1.3 s and 2.3 s on worker 0's timeline: they count in the intervals ending at 2 and 3.
	want := map[float64][3]float64{1: {100, 1, 5}, 2: {200, 0, 9}, 3: {95, 2, 4}}
	if len(rows) != len(want) {
		t.Fatalf("rows %+v", rows)
	}
	for _, r := range rows {
		w := want[r.T]
		if float64(r.Count) != w[0] || float64(r.Errors) != w[1] || r.P99 != w[2] || r.Throughput != float64(r.Count) {
			t.Fatalf("interval %g: %+v, want count %g errors %g p99 %g", r.T, r, w[0], w[1], w[2])
		}
	}
}

// TestHistoriesShiftAttempts: an operation's attempts move onto the merged timeline with its call and
// return, widened as they are: attribution reads them next to the other workers' operations.
func TestHistoriesShiftAttempts(t *testing.T) {
	dir := t.TempDir()
	w := mkdir(t, filepath.Join(dir, "w1"))
	hw, err := history.NewWriter(w)
	if err != nil {
		t.Fatal(err)
	}
	hw.Operation(&history.Operation{Client: 3, Call: 1000, Return: 9000, AttemptsRecorded: true,
		Request:  history.Request{Kind: history.KindRange, Range: &history.Range{Key: "k"}},
		Attempts: []history.Attempt{{Start: 1000, End: 5000, Code: "Unavailable"}, {Start: 6000, End: 8000}}})
	if err := hw.Close(); err != nil {
		t.Fatal(err)
	}
	out := mkdir(t, filepath.Join(dir, "merged"))
	sum := &results.Summary{Split: &results.Split{Workers: 1, Worker: 0}}
	if _, _, err := Histories(out, []Worker{{Dir: w, Summary: sum, ShiftNs: 100_000, WidenNs: 10}}); err != nil {
		t.Fatal(err)
	}
	var got []history.Attempt
	if err := history.ReadOperations(filepath.Join(out, history.HistoryFile), func(op *history.Operation) error {
		got = op.Attempts
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []history.Attempt{{Start: 100_990, End: 105_010, Code: "Unavailable"}, {Start: 105_990, End: 108_010}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("attempts %+v, want %+v", got, want)
	}
}
