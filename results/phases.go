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
	// Writes and Reads count the writes and reads that succeeded while the window was observed (from
	// injection to the end of its recovery phase).
	Writes int64 `json:"writes"`
	Reads  int64 `json:"reads"`
	// WriteGapMs is the window's write gap as LongestGap defines it, over the observation: the longest
	// time without a successful write, from the last write that succeeded before it (WriteGapFromNs, a
	// completion time) to the first that succeeded after it (WriteGapToNs). WriteGapOpen means writes
	// were still being tried, none having succeeded since WriteGapFromNs, when the observation ended
	// (WriteGapToNs is then its end). All zero when no write was made.
	WriteGapMs     float64 `json:"write_gap_ms"`
	WriteGapFromNs int64   `json:"write_gap_from_ns"`
	WriteGapToNs   int64   `json:"write_gap_to_ns"`
	WriteGapOpen   bool    `json:"write_gap_open,omitempty"`
	// ReadGapMs and the other ReadGap fields are the same for reads.
	ReadGapMs     float64 `json:"read_gap_ms"`
	ReadGapFromNs int64   `json:"read_gap_from_ns"`
	ReadGapToNs   int64   `json:"read_gap_to_ns"`
	ReadGapOpen   bool    `json:"read_gap_open,omitempty"`
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

// okStripe holds the completion offsets of the latest successful write and read one group of workers
// saw.
type okStripe struct {
	write, read atomic.Int64
	_           [48]byte
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
	// lastOK holds the completion offsets of the latest successful write and read, striped by worker so
	// that records from different cores do not contend on one cache line; a window reads the maximum when
	// it opens: it bounds the window's first gap.
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
	if r.Access != AccessNone && succeeded(r) {
		st := &p.lastOK[uint(worker)%uint(len(p.lastOK))]
		s := &st.write
		if r.Access == AccessRead {
			s = &st.read
		}
		for end := int64(r.End); ; {
			prev := s.Load()
			if end <= prev || s.CompareAndSwap(prev, end) {
				break
			}
		}
	}
	for _, w := range *p.windows.Load() {
		w.record(r)
	}
}

// succeeded reports whether etcd answered r without an error: a transaction whose comparison failed was
// answered.
func succeeded(r *Record) bool { return r.Outcome != Error }

// latestOK returns the completion offsets of the latest successful write and read so far (0: none).
func (p *Phases) latestOK() (write, read int64) {
	for i := range p.lastOK {
		write = max(write, p.lastOK[i].write.Load())
		read = max(read, p.lastOK[i].read.Load())
	}
	return write, read
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
	// Successes before the fault bound its first gaps.
	if write, read := p.latestOK(); write > 0 || read > 0 {
		if write > 0 {
			w.act.Writes.Add(time.Duration(write), time.Duration(write), true)
		}
		if read > 0 {
			w.act.Reads.Add(time.Duration(read), time.Duration(read), true)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.open++
	p.changed(at)
	old := *p.windows.Load()
	ws := append(append(make([]*Window, 0, len(old)+1), old...), w)
	p.windows.Store(&ws)
	return w
}

// Window is one fault window under observation. Its gaps are LongestGap's over the observation
// (injection to Close), from the records that arrive until Finalize, so that requests still in flight at
// Close count (a request that has not come back by Finalize is not known to the window). Its operations
// and errors are the records intended during the observation.
type Window struct {
	p           *Phases
	start       time.Duration
	healed      bool // guarded by p.mu
	phaseClosed bool // guarded by p.mu

	mu         sync.Mutex
	closed     bool
	final      bool
	obsEnd     time.Duration
	act        Activities
	writes     int64
	reads      int64
	ops        int64
	errors     int64
	errClasses map[string]int64
	result     Availability // once final
}

func (w *Window) record(r *Record) {
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
	if r.Access == AccessNone || (w.closed && r.Start > w.obsEnd) {
		return
	}
	ok := succeeded(r)
	// Time in flight before the injection says nothing about the window: the bitmaps start there.
	w.act.Add(r.Access, max(r.Start, w.start), r.End, ok)
	if ok && r.End >= w.start && (!w.closed || r.End <= w.obsEnd) {
		if r.Access == AccessWrite {
			w.writes++
		} else {
			w.reads++
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

// Close ends the observation at offset at: the window's phase ends, and so does the span its gaps are
// measured over. Only the first call counts.
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
	a := Availability{Writes: w.writes, Reads: w.reads, Ops: w.ops, Errors: w.errors, ObservedToNs: int64(w.obsEnd)}
	a.setGaps(&w.act, w.start, w.obsEnd)
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

// setGaps sets the write and read gaps of a window observed over [from, until] from the activity of its
// requests.
// SetGaps measures the write and read gaps over [from, until] from act (a merged run measures its
// windows again over every worker's requests).
func (a *Availability) SetGaps(act *Activities, from, until time.Duration) {
	a.setGaps(act, from, until)
}

func (a *Availability) setGaps(act *Activities, from, until time.Duration) {
	if g, ok := LongestGap(&act.Writes, from, until); ok {
		a.WriteGapMs, a.WriteGapFromNs, a.WriteGapToNs, a.WriteGapOpen = float64(g.Length())/1e6, int64(g.From), int64(g.To), g.Open
	}
	if g, ok := LongestGap(&act.Reads, from, until); ok {
		a.ReadGapMs, a.ReadGapFromNs, a.ReadGapToNs, a.ReadGapOpen = float64(g.Length())/1e6, int64(g.From), int64(g.To), g.Open
	}
}
