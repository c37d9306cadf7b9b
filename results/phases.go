package results

import (
	"sort"
	"sync"
	"sync/atomic"
	"time"
)

// Phases of a run with faults. A record belongs to the phase in force at its intended start: Fault while
// any fault is in effect, Recovery from a fault's heal until its observation ends (the cluster is healthy
// again and a settling time has passed), Steady otherwise.
const (
	PhaseSteady   = "steady"
	PhaseFault    = "fault"
	PhaseRecovery = "recovery"
)

var phaseNames = [3]string{PhaseSteady, PhaseFault, PhaseRecovery}

// Phase summarises the records of one phase.
type Phase struct {
	// Seconds is how long the phase lasted within the measured window.
	Seconds    float64               `json:"seconds"`
	Total      Total                 `json:"total"`
	Operations map[string]*Operation `json:"operations"`
}

// Availability is what one fault window did to the cluster's clients. Times are offsets from the run's
// time base, in nanoseconds, like the window's.
type Availability struct {
	// Writes is the number of writes that succeeded while the window was observed (from injection to the
	// end of its recovery phase).
	Writes int64 `json:"writes"`
	// WriteGapMs is the longest time without a successful write that overlaps the window: from the last
	// write that succeeded before it (WriteGapFromNs, a completion time) to the first that succeeded after
	// it (WriteGapToNs). WriteGapOpen means writes were still failing, none having succeeded since
	// WriteGapFromNs, when the observation ended.
	WriteGapMs     float64 `json:"write_gap_ms"`
	WriteGapFromNs int64   `json:"write_gap_from_ns"`
	WriteGapToNs   int64   `json:"write_gap_to_ns"`
	WriteGapOpen   bool    `json:"write_gap_open,omitempty"`
	// TimeToLeaderMs is the time from injection until a leader other than the one in office at injection
	// (or the same member, re-elected in a later term) was observed; absent when no election happened.
	TimeToLeaderMs *float64 `json:"time_to_leader_ms,omitempty"`
	NewLeader      string   `json:"new_leader,omitempty"`
	// LeaderChanges counts the elections observed during the window (a new leader, or a new term).
	LeaderChanges int `json:"leader_changes"`
	// Ops and Errors count the operations intended to start during the observation, errors by class
	// (requests still in flight when the observation ended included).
	Ops           int64            `json:"ops"`
	Errors        int64            `json:"errors"`
	ErrorsByClass map[string]int64 `json:"errors_by_class,omitempty"`
	// ObservedToNs is when the observation ended.
	ObservedToNs int64 `json:"observed_to_ns"`
}

type okStripe struct {
	v atomic.Int64
	_ [56]byte
}

type transition struct {
	at    time.Duration
	phase int
}

// Phases is a Sink that splits records into steady, fault and recovery phases (one Collector each) and
// measures availability during each fault window. Recording is allocation-free: the phase of a record is
// found by a binary search in an immutable list of phase transitions, and only windows under observation
// are updated.
type Phases struct {
	collectors [3]*Collector

	transitions atomic.Pointer[[]transition]
	windows     atomic.Pointer[[]*Window] // under observation
	// lastOK holds the completion offset of the latest successful write, striped by worker so that writes
	// from different cores do not contend on one cache line; a window reads the maximum when it opens.
	lastOK []okStripe

	mu         sync.Mutex
	open       int // windows injected and not healed
	recovering int // windows healed and still observed
}

// NewPhases returns a Phases whose collectors use opts (without files: Dir is ignored).
func NewPhases(opts CollectorOptions) (*Phases, error) {
	opts.Dir = ""
	p := &Phases{lastOK: make([]okStripe, 64)}
	for i := range p.collectors {
		c, err := NewCollector(opts)
		if err != nil {
			return nil, err
		}
		p.collectors[i] = c
	}
	p.transitions.Store(&[]transition{})
	p.windows.Store(&[]*Window{})
	return p, nil
}

// Begin marks the start of the load for every phase's collector.
func (p *Phases) Begin(at time.Duration) {
	for _, c := range p.collectors {
		c.Begin(at)
	}
}

// Record files r under the phase of its intended start and counts it in every window under observation.
func (p *Phases) Record(worker int, r *Record) {
	p.collectors[p.phaseAt(r.Intended)].Record(worker, r)
	okWrite := r.Write && r.Outcome == OK
	if okWrite {
		s := &p.lastOK[uint(worker)%uint(len(p.lastOK))].v
		for end := int64(r.End); ; {
			prev := s.Load()
			if end <= prev || s.CompareAndSwap(prev, end) {
				break
			}
		}
	}
	for _, w := range *p.windows.Load() {
		w.record(r, okWrite)
	}
}

// latestOK returns the completion offset of the latest successful write so far.
func (p *Phases) latestOK() int64 {
	var m int64
	for i := range p.lastOK {
		m = max(m, p.lastOK[i].v.Load())
	}
	return m
}

func (p *Phases) phaseAt(t time.Duration) int {
	ts := *p.transitions.Load()
	i := sort.Search(len(ts), func(i int) bool { return ts[i].at > t })
	if i == 0 {
		return 0
	}
	return ts[i-1].phase
}

// changed publishes the phase after a window event at offset at. Called with mu held.
func (p *Phases) changed(at time.Duration) {
	phase := 0
	switch {
	case p.open > 0:
		phase = 1
	case p.recovering > 0:
		phase = 2
	}
	old := *p.transitions.Load()
	if len(old) > 0 {
		at = max(at, old[len(old)-1].at) // transitions stay in order
	}
	if (len(old) == 0 && phase == 0) || (len(old) > 0 && old[len(old)-1].phase == phase) {
		return
	}
	ts := make([]transition, len(old), len(old)+1)
	copy(ts, old)
	ts = append(ts, transition{at: at, phase: phase})
	p.transitions.Store(&ts)
}

// Open starts observing a fault window that took effect at offset at. Heal, Close and Finalize it in
// that order.
func (p *Phases) Open(at time.Duration) *Window {
	w := &Window{p: p, start: at, errClasses: map[string]int64{}}
	// Writes that succeeded before the fault bound the gap from below.
	w.lastOK = p.latestOK()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.open++
	p.changed(at)
	old := *p.windows.Load()
	ws := append(append(make([]*Window, 0, len(old)+1), old...), w)
	p.windows.Store(&ws)
	return w
}

// Window is one fault window under observation. Its write gap is measured from completions during the
// observation (injection to Close); its operations and errors are the records intended during the
// observation, counted until Finalize so that requests still in flight at Close are not lost.
type Window struct {
	p           *Phases
	start       time.Duration
	healed      bool // guarded by p.mu
	phaseClosed bool // guarded by p.mu

	mu         sync.Mutex
	closed     bool
	final      bool
	obsEnd     time.Duration
	lastOK     int64 // latest successful write completion seen by this window
	lastFail   int64 // latest failed write completion
	gap        int64
	gapFrom    int64
	gapTo      int64
	gapOpen    bool
	writes     int64
	ops        int64
	errors     int64
	errClasses map[string]int64
	result     Availability // once final
}

func (w *Window) record(r *Record, okWrite bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.final {
		return
	}
	if r.Intended >= w.start && (!w.closed || r.Intended < w.obsEnd) {
		w.ops++
		if r.Outcome == Error {
			w.errors++
			w.errClasses[r.ErrClass]++
		}
	}
	if w.closed || r.End < w.start {
		return
	}
	if r.Write && r.Outcome == Error {
		w.lastFail = max(w.lastFail, int64(r.End))
	}
	if okWrite {
		w.writes++
		// Completions can be reported slightly out of order by concurrent workers; one that is not the
		// latest closes no gap.
		if end := int64(r.End); end > w.lastOK {
			if end-w.lastOK > w.gap {
				w.gap, w.gapFrom, w.gapTo = end-w.lastOK, w.lastOK, end
			}
			w.lastOK = end
		}
	}
}

// Heal marks the fault removed at offset at: the window's recovery phase begins.
func (w *Window) Heal(at time.Duration) {
	p := w.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if w.healed || w.phaseClosed {
		return
	}
	w.healed = true
	p.open--
	p.recovering++
	p.changed(at)
}

// Close ends the observation at offset at: the window's phase ends and its write gap is settled. Only
// the first call counts.
func (w *Window) Close(at time.Duration) {
	p := w.p
	p.mu.Lock()
	if !w.phaseClosed {
		w.phaseClosed = true
		if w.healed {
			p.recovering--
		} else {
			p.open--
		}
		p.changed(at)
	}
	p.mu.Unlock()

	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	w.closed, w.obsEnd = true, at
	// A gap still open at the end of the observation (writes were failing, none had succeeded since)
	// counts up to its end.
	if open := int64(at) - w.lastOK; w.lastOK > 0 && w.lastFail > w.lastOK && open > w.gap {
		w.gap, w.gapFrom, w.gapTo, w.gapOpen = open, w.lastOK, 0, true
	}
}

// Finalize stops counting the window's records (closing it at offset at if it is still observed) and
// returns its availability figures, without the leader figures, which the caller observes. Later calls
// return the same figures.
func (w *Window) Finalize(at time.Duration) Availability {
	w.Close(at)
	p := w.p
	p.mu.Lock()
	old := *p.windows.Load()
	ws := make([]*Window, 0, len(old))
	for _, o := range old {
		if o != w {
			ws = append(ws, o)
		}
	}
	p.windows.Store(&ws)
	p.mu.Unlock()

	w.mu.Lock()
	defer w.mu.Unlock()
	if w.final {
		return w.result
	}
	w.final = true
	a := Availability{Writes: w.writes, Ops: w.ops, Errors: w.errors, ObservedToNs: int64(w.obsEnd),
		WriteGapMs: float64(w.gap) / 1e6, WriteGapFromNs: w.gapFrom, WriteGapToNs: w.gapTo, WriteGapOpen: w.gapOpen}
	if len(w.errClasses) > 0 {
		a.ErrorsByClass = make(map[string]int64, len(w.errClasses))
		for k, v := range w.errClasses {
			a.ErrorsByClass[k] = v
		}
	}
	w.result = a
	return a
}

// Close folds the last interval of every phase at offset end.
func (p *Phases) Close(end time.Duration) error {
	var first error
	for _, c := range p.collectors {
		if err := c.Close(end); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Summary returns the phases that have records or time in [from, end), the measured window.
func (p *Phases) Summary(from, end time.Duration) map[string]*Phase {
	var secs [3]time.Duration
	ts := *p.transitions.Load()
	cur, at := 0, from
	for _, t := range ts {
		if t.at > at {
			if t.at >= end {
				break
			}
			secs[cur] += t.at - at
			at = t.at
		}
		cur = t.phase
	}
	if end > at {
		secs[cur] += end - at
	}
	out := map[string]*Phase{}
	for i, c := range p.collectors {
		ops := c.Operations(secs[i])
		if len(ops) == 0 && secs[i] == 0 {
			continue
		}
		out[phaseNames[i]] = &Phase{Seconds: secs[i].Seconds(), Operations: ops, Total: Totals(ops)}
	}
	return out
}
