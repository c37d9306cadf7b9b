package kubesim

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// Options shape a simulated run.
type Options struct {
	Seed     int64
	Duration time.Duration // length of the load (default 10 minutes)
	Rate     float64       // requests per second of the main load (default 500)

	Nodes      int // kubelets renewing their node lease every 10 s (default 100)
	Namespaces int // pod namespaces (default 3)
	Pods       int // pods the simulated controllers keep around (default 900)
	Apiservers int // watch caches (one watcher per resource each) and master leases (default 3)

	// Names, when positive, names pods and events from that many names each, so that the keyspace stops
	// growing however long the run: a new pod takes a name no pod holds (pods of a StatefulSet come back
	// under theirs), an event the name after the last (recurring events; while one of that name exists,
	// its create fails). It must exceed Pods. Zero: every pod and event has a name of its own, as in a
	// cluster whose pods and events come and go.
	Names int

	// Every FaultEvery a fault window of FaultLength opens: a third of the requests sent during it time
	// out after 5 s, and half of those writes take effect anyway, possibly after the timeout.
	FaultEvery  time.Duration // default 60 s; negative: no faults
	FaultLength time.Duration // default 5 s

	CompactEvery time.Duration // default 60 s (kube-apiserver: 5 minutes)

	// Bug makes the simulated etcd break one of its guarantees a few times (see Bugs), for tests of the
	// checker. Empty: a correct etcd.
	Bug string
}

// Bugs are the ways the simulated etcd can be made to misbehave.
var Bugs = []string{
	"stale-read",          // a linearizable get answered from an older revision
	"lost-write",          // a put acknowledged and never applied
	"revision-back",       // a write answered with a revision below its own
	"duplicate-event",     // a watch response delivered twice
	"dropped-event",       // a watch response never delivered
	"reordered-events",    // two watch responses swapped
	"early-progress",      // a progress notification sent before the events it covers
	"early-lease-expiry",  // a lease expired long before its TTL
	"future-serializable", // a serializable read claiming a revision not yet written
	"compacted-read",      // a read below the compacted revision that succeeds
	"wrong-count",         // a count off by one
	"wrong-prevkv",        // a watch event with another version as its previous value
}

func (o *Options) defaults() {
	if o.Duration == 0 {
		o.Duration = 10 * time.Minute
	}
	if o.Rate == 0 {
		o.Rate = 500
	}
	if o.Nodes == 0 {
		o.Nodes = 100
	}
	if o.Namespaces == 0 {
		o.Namespaces = 3
	}
	if o.Pods == 0 {
		o.Pods = 900
	}
	if o.Apiservers == 0 {
		o.Apiservers = 3
	}
	if o.FaultEvery == 0 {
		o.FaultEvery = time.Minute
	}
	if o.FaultLength == 0 {
		o.FaultLength = 5 * time.Second
	}
	if o.CompactEvery == 0 {
		o.CompactEvery = time.Minute
	}
}

// Stats describes a written history.
type Stats struct {
	Operations   int   `json:"operations"`
	Failed       int   `json:"failed"`
	WatchRecords int   `json:"watch_records"`
	WatchEvents  int   `json:"watch_events"`
	Revisions    int64 `json:"revisions"`
	Faults       int   `json:"faults"`
}

// sim is one simulated run: the options, the store, the virtual clock with its pending events, the
// history being written, and what the actors remember between their requests.
type sim struct {
	o      Options
	rng    *rand.Rand
	st     *store
	w      *history.Writer
	q      queue
	seq    int64
	now    int64
	end    int64
	faults []results.FaultWindow

	free       []int
	nextClient int
	written    map[int]uint32

	pods     []string
	podIndex map[string]int
	podSeq   int
	eventSeq int
	eventLse int64
	watchers []*swatcher
	nextWID  int

	compactPrev int64
	stats       Stats
	bugs        int // bugs injected so far
}

// bug reports whether to misbehave in the named way now: a few times, after the first seconds.
func (s *sim) bug(name string, p float64) bool {
	if s.o.Bug != name || s.bugs >= 3 || s.now < 3*sec || s.rng.Float64() >= p {
		return false
	}
	s.bugs++
	return true
}

// Write simulates a run and writes its history files (and faults.jsonl) into dir.
func Write(dir string, o Options) (Stats, error) {
	o.defaults()
	if o.Names > 0 && o.Names <= o.Pods {
		return Stats{}, fmt.Errorf("kubesim: %d names for %d pods: there must be more names than pods", o.Names, o.Pods)
	}
	w, err := history.NewWriter(dir)
	if err != nil {
		return Stats{}, err
	}
	s := &sim{o: o, rng: rand.New(rand.NewPCG(uint64(o.Seed), 0x6b756265)), st: newStore(o.Bug == "compacted-read"), w: w,
		written: map[int]uint32{}, podIndex: map[string]int{}, end: int64(o.Duration)}
	s.run()
	if err := w.Close(); err != nil {
		return s.stats, err
	}
	s.stats.Revisions = s.st.rev
	s.stats.Faults = len(s.faults)
	return s.stats, writeFaults(dir, s.faults)
}

// writeFaults writes the fault windows as a real run's faults.jsonl, which the checker reads to annotate
// its visualizations.
func writeFaults(dir string, faults []results.FaultWindow) error {
	f, err := os.Create(filepath.Join(dir, results.FaultsFile))
	if err != nil {
		return err
	}
	enc := json.NewEncoder(f)
	for _, fw := range faults {
		if err := enc.Encode(fw); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// run starts every actor of the simulated cluster and its load, and runs them to the end.
func (s *sim) run() {
	s.scheduleFaults()
	s.startWatchers()
	s.at(10*ms, s.mainTick)
	for i := range s.o.Nodes {
		s.at(20*ms+s.rng.Int64N(10*sec), func() { s.nodeLease(i) })
	}
	for i := range s.o.Apiservers {
		s.at(50*ms+s.rng.Int64N(10*sec), func() { s.masterLease(i) })
		s.at(sec+s.rng.Int64N(2*sec), func() { s.health(i) })
	}
	s.at(30*ms, s.leaderElection)
	s.at(5*ms, s.eventLease)
	s.at(int64(s.o.CompactEvery), s.compactor)
	s.at(5*sec, s.counter)
	s.drain()
}

// scheduleFaults opens a fault window every FaultEvery: requests sent in it may time out (see send),
// and it breaks a third of the watch streams, whose responses arrive only after it closes. The windows
// go to faults.jsonl, as a real run's faults do, so that the checker annotates its violations with them.
func (s *sim) scheduleFaults() {
	if s.o.FaultEvery <= 0 {
		return
	}
	base := time.Unix(1_700_000_000, 0).UTC()
	for t := int64(s.o.FaultEvery); t+int64(s.o.FaultLength) < s.end; t += int64(s.o.FaultEvery) {
		s.faults = append(s.faults, results.FaultWindow{Fault: "simulated-fault", Spec: "timeouts", Targets: []string{"m1"},
			Start: base.Add(time.Duration(t)), End: base.Add(time.Duration(t) + s.o.FaultLength),
			StartNs: t, EndNs: t + int64(s.o.FaultLength), Outcome: "recovered"})
		start, stop := t, t+int64(s.o.FaultLength)
		s.at(start, func() {
			for _, w := range s.watchers {
				if s.rng.IntN(3) == 0 {
					w.brokenUntil = stop + s.rng.Int64N(sec)
				}
			}
		})
	}
}

// inFault reports whether t lies in a fault window: requests sent then may time out.
func (s *sim) inFault(t int64) bool {
	for _, f := range s.faults {
		if t >= f.StartNs && t < f.EndNs {
			return true
		}
	}
	return false
}
