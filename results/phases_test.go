package results

import (
	"math"
	"testing"
	"time"
)

func write(intended, end time.Duration, outcome Outcome, class string) *Record {
	return &Record{Op: "put", Intended: intended, Start: intended, End: end, Outcome: outcome, ErrClass: class, Access: AccessWrite}
}

// TestPhasesSplitAndAvailability plays a fault window over a stream of writes: records land in the phase
// of their intended start, phase durations add up, and the window's write gap runs from the last success
// before the outage to the first after it, whatever the order records arrive in.
func TestPhasesSplitAndAvailability(t *testing.T) {
	s := time.Second
	p, err := NewPhases(CollectorOptions{Start: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	p.Begin(0)
	for i := range 10 { // steady: a write every 100 ms until 1 s
		at := time.Duration(i) * 100 * time.Millisecond
		p.Record(i, write(at, at+5*time.Millisecond, OK, ""))
	}
	w := p.Open(1 * s)
	p.Record(0, write(1050*time.Millisecond, 1200*time.Millisecond, OK, "")) // the last success before the outage
	for i := range 5 {
		at := 1300*time.Millisecond + time.Duration(i)*100*time.Millisecond
		p.Record(i, write(at, at+10*time.Millisecond, Error, "unavailable"))
	}
	p.Record(1, write(1400*time.Millisecond, 2500*time.Millisecond, OK, "")) // the first success after it
	p.Record(2, write(1500*time.Millisecond, 2400*time.Millisecond, OK, "")) // reported late, still the first
	w.Heal(3 * s)
	p.Record(3, write(3500*time.Millisecond, 3510*time.Millisecond, OK, ""))
	p.Record(3, write(4400*time.Millisecond, 4500*time.Millisecond, OK, ""))
	w.Close(5 * s)
	p.Record(4, write(5500*time.Millisecond, 5510*time.Millisecond, OK, ""))            // steady again, not the window's
	p.Record(5, write(4900*time.Millisecond, 5600*time.Millisecond, Error, "deadline")) // in flight at the close: the window's
	a := w.Finalize(7 * s)
	if err := p.Close(6 * s); err != nil {
		t.Fatal(err)
	}

	if a.WriteGapOpen || math.Abs(a.WriteGapMs-1200) > 0.001 || a.WriteGapFromNs != int64(1200*time.Millisecond) || a.WriteGapToNs != int64(2400*time.Millisecond) {
		t.Fatalf("gap %+v, want 1200 ms from 1.2 s to 2.4 s", a)
	}
	if a.ReadGapMs != 0 || a.Reads != 0 {
		t.Fatalf("read gap %+v in a run without reads", a)
	}
	if a.Ops != 11 || a.Errors != 6 || a.ErrorsByClass["unavailable"] != 5 || a.ErrorsByClass["deadline"] != 1 || a.Writes != 5 || a.ObservedToNs != int64(5*s) {
		t.Fatalf("counts %+v", a)
	}
	w.Close(9 * s)
	if again := w.Finalize(9 * s); again.ObservedToNs != a.ObservedToNs || again.WriteGapMs != a.WriteGapMs || again.Ops != a.Ops {
		t.Fatalf("a second Close or Finalize changed the figures: %+v", again)
	}

	sum := p.Summary(0, 6*s)
	for _, tt := range []struct {
		phase   string
		seconds float64
		count   int64
		errors  int64
	}{
		{PhaseSteady, 2, 11, 0},  // 0-1 s and 5-6 s
		{PhaseFault, 2, 8, 5},    // 1-3 s
		{PhaseRecovery, 2, 3, 1}, // 3-5 s
	} {
		ph := sum[tt.phase]
		if ph == nil {
			t.Fatalf("no %s phase in %v", tt.phase, sum)
		}
		if ph.Seconds != tt.seconds || ph.Total.Count != tt.count || ph.Total.Errors != tt.errors {
			t.Errorf("%s: %.1f s, %d ops, %d errors; want %.1f s, %d, %d", tt.phase, ph.Seconds, ph.Total.Count, ph.Total.Errors,
				tt.seconds, tt.count, tt.errors)
		}
	}
}

// TestWindowOpenGap: when no write succeeds after the fault by the end of the observation, the gap is
// reported open, up to the end.
func TestWindowOpenGap(t *testing.T) {
	p, _ := NewPhases(CollectorOptions{Start: time.Now()})
	p.Begin(0)
	p.Record(0, write(0, 100*time.Millisecond, OK, ""))
	w := p.Open(time.Second)
	p.Record(0, write(time.Second, 2*time.Second, Error, "deadline"))
	a := w.Finalize(4 * time.Second)
	if !a.WriteGapOpen || a.WriteGapMs != 3900 || a.WriteGapFromNs != int64(100*time.Millisecond) || a.WriteGapToNs != int64(4*time.Second) {
		t.Fatalf("%+v, want an open gap of 3900 ms from 0.1 s", a)
	}
}

// TestOverlappingWindows: two windows at once keep the fault phase until both are healed.
func TestOverlappingWindows(t *testing.T) {
	p, _ := NewPhases(CollectorOptions{Start: time.Now()})
	p.Begin(0)
	a := p.Open(1 * time.Second)
	b := p.Open(2 * time.Second)
	a.Heal(3 * time.Second)
	if got := p.phaseAt(3500 * time.Millisecond); got != 1 {
		t.Fatalf("phase %d while b is still in effect, want fault", got)
	}
	b.Heal(4 * time.Second)
	if got := p.phaseAt(4500 * time.Millisecond); got != 2 {
		t.Fatalf("phase %d after both heals, want recovery", got)
	}
	a.Close(5 * time.Second)
	b.Close(6 * time.Second)
	if got := p.phaseAt(6500 * time.Millisecond); got != 0 {
		t.Fatalf("phase %d after both observations, want steady", got)
	}
}

// TestPhasesRecordAllocs: recording stays allocation-free, with and without windows under observation.
func TestPhasesRecordAllocs(t *testing.T) {
	p, _ := NewPhases(CollectorOptions{Start: time.Now()})
	p.Begin(0)
	r := write(time.Second, time.Second+time.Millisecond, OK, "")
	e := write(time.Second, time.Second+time.Millisecond, Error, "deadline")
	p.Record(0, r)
	p.Record(0, e) // first use of an error class allocates its map entry
	if n := testing.AllocsPerRun(1000, func() { p.Record(1, r) }); n != 0 {
		t.Fatalf("%v allocations per record without a window", n)
	}
	w := p.Open(time.Second)
	p.Record(0, e)
	if n := testing.AllocsPerRun(1000, func() { p.Record(1, r); p.Record(2, e) }); n != 0 {
		t.Fatalf("%v allocations per record with a window open", n)
	}
	w.Finalize(2 * time.Second)
}

func BenchmarkPhasesRecord(b *testing.B) {
	for _, open := range []bool{false, true} {
		name := "steady"
		if open {
			name = "window-open"
		}
		b.Run(name, func(b *testing.B) {
			p, _ := NewPhases(CollectorOptions{Start: time.Now()})
			p.Begin(0)
			if open {
				p.Open(0)
			}
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				r := write(time.Second, time.Second+time.Millisecond, OK, "")
				worker := 0
				for pb.Next() {
					worker++
					r.End += time.Microsecond
					p.Record(worker, r)
				}
			})
		})
	}
}
