package merge

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// logRecords writes a worker's record log: one put every 10 ms of its own timeline over [from, to), and
// marks its summary as having logged them over that measured window.
func logRecords(t *testing.T, dir string, from, to time.Duration) {
	t.Helper()
	l, err := results.NewRecordLog(filepath.Join(dir, results.RecordsFile), 0)
	if err != nil {
		t.Fatal(err)
	}
	l.Begin(from)
	for at := from; at < to; at += 10 * time.Millisecond {
		l.Record(0, &results.Record{Op: "put", Intended: at, Start: at, End: at + time.Millisecond, Access: results.AccessWrite})
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	s, err := results.ReadSummary(dir)
	if err != nil {
		t.Fatal(err)
	}
	s.Split.Records, s.Split.MeasuredFromNs, s.Split.LoadEndNs = true, int64(from), int64(to)
	if err := results.WriteSummary(dir, s); err != nil {
		t.Fatal(err)
	}
}

// TestPhasesFileEveryWorkersRecords: worker 1's time base is 2 s after worker 0's; a fault window injected
// at 10 s on worker 0's timeline, healed at 12 s and observed until 15 s. Every worker's records are filed
// under the phase in force at their intended start on the merged timeline: worker 1's record at its own
// 8 s is in the fault phase; the phases' counts add up to every record logged; a worker without a record
// log leaves the base run's tables.
func TestPhasesFileEveryWorkersRecords(t *testing.T) {
	dir := t.TempDir()
	base := time.Now()
	w0 := worker(t, dir, 0, 2, base, 0, time.Microsecond, nil)
	w1 := worker(t, dir, 1, 2, base.Add(2*time.Second), 0, time.Microsecond, nil)
	set, err := Load([]string{w0, w1}, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, why, err := Phases(set.Workers, nil); err != nil || why == "" {
		t.Fatalf("workers without record logs: %q, %v", why, err)
	}
	logRecords(t, w0, 5*time.Second, 20*time.Second) // 1500 records, 5-20 s merged
	logRecords(t, w1, 4*time.Second, 18*time.Second) // 1400 records, 6-20 s merged
	set, err = Load([]string{w0, w1}, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	ws := set.Workers
	faults := []results.FaultWindow{{Fault: "kill-leader", StartNs: int64(10 * time.Second), EndNs: int64(12 * time.Second),
		Availability: &results.Availability{ObservedToNs: int64(15 * time.Second)}}}
	phases, why, err := Phases(ws, faults)
	if err != nil || why != "" {
		t.Fatalf("%q, %v", why, err)
	}
	// Worker 0: 500 steady before 10 s, 200 fault, 300 recovery, 500 steady from 15 s. Worker 1 (merged
	// 6-20 s): 400 steady, 200 fault, 300 recovery, 500 steady.
	want := map[string]struct {
		count   int64
		seconds float64
	}{
		results.PhaseSteady:   {1900, 10}, // 5-10 s and 15-20 s
		results.PhaseFault:    {400, 2},
		results.PhaseRecovery: {600, 3},
	}
	if len(phases) != len(want) {
		t.Fatalf("phases %v", phases)
	}
	for name, w := range want {
		p := phases[name]
		if p == nil || p.Total.Count != w.count || p.Seconds != w.seconds || p.Operations["put"] == nil {
			t.Fatalf("%s: %+v, want %d records over %g s", name, p, w.count, w.seconds)
		}
	}
}
