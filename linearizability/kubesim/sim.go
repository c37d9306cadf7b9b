package kubesim

import (
	"container/heap"
	"encoding/json"
	"fmt"
	"math"
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

const (
	ms      = int64(time.Millisecond)
	sec     = int64(time.Second)
	timeout = 5 * sec
)

type event struct {
	t   int64
	seq int64
	fn  func()
}

type queue []event

func (q queue) Len() int { return len(q) }
func (q queue) Less(i, j int) bool {
	if q[i].t != q[j].t {
		return q[i].t < q[j].t
	}
	return q[i].seq < q[j].seq
}
func (q queue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *queue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *queue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

type swatcher struct {
	id, client  int
	req         history.WatchRequest
	apiserver   int
	lastT       int64
	brokenUntil int64
}

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

func (s *sim) at(t int64, fn func()) {
	s.seq++
	heap.Push(&s.q, event{t: t, seq: s.seq, fn: fn})
}

func (s *sim) run() {
	base := time.Unix(1_700_000_000, 0).UTC()
	if s.o.FaultEvery > 0 {
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
	for s.q.Len() > 0 {
		e := heap.Pop(&s.q).(event)
		s.now = e.t
		e.fn()
	}
}

func (s *sim) inFault(t int64) bool {
	for _, f := range s.faults {
		if t >= f.StartNs && t < f.EndNs {
			return true
		}
	}
	return false
}

func (s *sim) client() int {
	if n := len(s.free); n > 0 {
		c := s.free[n-1]
		s.free = s.free[:n-1]
		return c
	}
	s.nextClient++
	return s.nextClient - 1
}

func (s *sim) value(client, size int) history.Value {
	s.written[client]++
	return history.Value{ID: uint64(client+1)<<32 | uint64(s.written[client]), Size: size}
}

// latency draws a service time: log-normal around 1.5 ms, slower in a fault window.
func (s *sim) latency(t int64) int64 {
	l := int64(1.5 * float64(ms) * math.Exp(s.rng.NormFloat64()*0.6))
	l = min(l, 200*ms)
	if s.inFault(t) {
		l += s.rng.Int64N(2 * sec)
	}
	return max(l, 100*int64(time.Microsecond))
}

// send issues a request at the current time from a fresh client. It takes effect at an instant inside
// its call and return, except when it times out: then it takes effect half the time, at any moment up to
// a second after the timeout. done is called at the return with the response or error.
func (s *sim) send(opname string, req history.Request, done func(*history.Response, error)) {
	call := s.now
	c := s.client()
	lat := s.latency(call)
	failed := s.inFault(call) && s.rng.IntN(3) == 0
	var resp *history.Response
	var err error
	ret := call + lat
	if failed {
		ret = call + timeout
		if isWrite(&req) && s.rng.IntN(2) == 0 {
			s.at(call+s.rng.Int64N(timeout+sec), func() { s.execute(&req) })
		}
	} else {
		s.at(call+lat/10+s.rng.Int64N(max(lat*8/10, 1)), func() { resp, err = s.execute(&req) })
	}
	s.at(ret, func() {
		op := history.Operation{Client: c, Op: opname, Call: call, Return: ret, Request: req}
		switch {
		case failed:
			err = fmt.Errorf("context deadline exceeded")
			op.Error = "deadline: context deadline exceeded"
		case err != nil:
			op.Error = "other: " + err.Error()
		default:
			op.Response = resp
		}
		s.w.Operation(&op)
		s.stats.Operations++
		if op.Error != "" {
			s.stats.Failed++
		}
		s.free = append(s.free, c)
		if done != nil {
			done(op.Response, err)
		}
	})
}

func isWrite(r *history.Request) bool {
	return r.IsWrite() || r.Kind == history.KindLeaseGrant || r.Kind == history.KindCompact
}

// execute applies a request to the store at the current time and notifies watchers of its changes.
func (s *sim) execute(req *history.Request) (*history.Response, error) {
	var resp *history.Response
	var err error
	switch req.Kind {
	case history.KindLeaseGrant:
		s.st.nextLease++
		id := s.st.nextLease
		s.st.leases[id] = &slease{id: id, ttl: req.Lease.TTL, expiry: s.now + req.Lease.TTL*sec, keys: map[string]bool{}}
		expiry := s.now + req.Lease.TTL*sec + s.rng.Int64N(500*ms)
		if req.Lease.TTL > 60 && s.o.Bug == "early-lease-expiry" {
			expiry = s.now + 20*sec
		}
		s.at(expiry, func() { s.expire(id) })
		resp = &history.Response{Revision: s.st.rev, Lease: &history.LeaseResponse{ID: id, TTL: req.Lease.TTL}}
	case history.KindLeaseRevoke:
		err = s.st.revoke(req.Lease.ID)
		resp = &history.Response{Revision: s.st.rev, Lease: &history.LeaseResponse{ID: req.Lease.ID}}
	case history.KindCompact:
		err = s.st.compact(req.Compact.Revision)
		resp = &history.Response{Revision: s.st.rev}
	case history.KindRange:
		var rr *history.RangeResponse
		rev := req.Range.Revision
		if rev == 0 && req.Range.End == "" && s.st.rev > 20 && s.bug("stale-read", 0.05) {
			rev = s.st.rev - 20
		}
		if rev != 0 && rev < s.st.compactRev && s.o.Bug == "compacted-read" {
			saved := s.st.compactRev
			s.st.compactRev = 0
			rr, err = s.st.rangeAt(req.Range, rev)
			s.st.compactRev = saved
		} else {
			rr, err = s.st.rangeAt(req.Range, rev)
		}
		if err == nil && req.Range.CountOnly && s.bug("wrong-count", 0.5) {
			rr.Count++
		}
		resp = &history.Response{Revision: s.st.rev, Range: rr}
	case history.KindPut:
		if s.bug("lost-write", 0.05) {
			return &history.Response{Revision: s.st.rev + 1, Put: &history.PutResponse{}}, nil
		}
		resp, err = s.st.apply(req)
		if err == nil && s.bug("revision-back", 0.05) {
			resp.Revision -= 3
		}
	default:
		resp, err = s.st.apply(req)
	}
	if err != nil {
		return nil, err
	}
	s.notify()
	return resp, nil
}

// expire revokes a lease whose TTL ran out, as etcd's leader does.
func (s *sim) expire(id int64) {
	if s.st.leases[id] == nil {
		return
	}
	s.st.revoke(id)
	s.notify()
}

// notify sends the changes of the last write to the watchers whose range they touch, each watcher in
// revision order, the events of one revision in one response.
func (s *sim) notify() {
	if len(s.st.changes) == 0 {
		return
	}
	rev := s.st.rev
	for _, w := range s.watchers {
		var evs []history.Event
		for _, e := range s.st.changes {
			if inRange(e.KV.Key, w.req.Key, w.req.End) {
				ev := e
				if !w.req.PrevKV {
					ev.PrevKV = nil
				}
				evs = append(evs, ev)
			}
		}
		if len(evs) == 0 {
			continue
		}
		if s.bug("wrong-prevkv", 0.01) {
			for i := range evs {
				if evs[i].PrevKV != nil && evs[i].PrevKV.Version > 1 {
					p := *evs[i].PrevKV
					p.Version--
					evs[i].PrevKV = &p
				}
			}
		}
		t := max(s.now+ms/2+s.rng.Int64N(10*ms), w.lastT+1, w.brokenUntil)
		switch {
		case s.bug("dropped-event", 0.01):
			continue
		case w.lastT > s.now+2 && s.bug("reordered-events", 0.5):
			// Deliver this response before the previous one, which is still on its way.
			t = w.lastT - 2
		case s.bug("duplicate-event", 0.01):
			s.deliver(w, t+1, rev, evs)
		}
		w.lastT = max(w.lastT, t+1)
		s.deliver(w, t, rev, evs)
	}
	s.st.changes = s.st.changes[:0]
}

func (s *sim) deliver(w *swatcher, t, rev int64, evs []history.Event) {
	s.at(t, func() {
		s.w.Watch(&history.WatchResponse{Watcher: w.id, Client: w.client, Time: t, Revision: rev, Events: evs})
		s.stats.WatchRecords++
		s.stats.WatchEvents += len(evs)
	})
}

func inRange(k, key, end string) bool {
	if end == "" {
		return k == key
	}
	return k >= key && (end == "\x00" || k < end)
}

func prefixEnd(p string) string {
	b := []byte(p)
	b[len(b)-1]++
	return string(b)
}

// startWatchers opens each apiserver's watch caches: pods, events, leases, with previous values and
// progress notifications, and schedules their periodic progress notifications.
func (s *sim) startWatchers() {
	for a := range s.o.Apiservers {
		for _, prefix := range []string{"/registry/pods/", "/registry/events/", "/registry/leases/"} {
			s.nextWID++
			w := &swatcher{id: s.nextWID, client: 100000 + s.nextWID, apiserver: a,
				req: history.WatchRequest{Key: prefix, End: prefixEnd(prefix), PrevKV: true, ProgressNotify: true, RequireLeader: true}}
			s.watchers = append(s.watchers, w)
			t0 := int64(a)*ms + int64(s.nextWID)*10
			s.at(t0, func() {
				s.w.Watch(&history.WatchResponse{Watcher: w.id, Client: w.client, Time: t0, Request: &w.req})
				s.at(t0+ms, func() {
					w.lastT = s.now
					s.w.Watch(&history.WatchResponse{Watcher: w.id, Client: w.client, Time: s.now, Revision: s.st.rev, Created: true})
				})
			})
			s.at(10*sec+s.rng.Int64N(10*sec), func() { s.progress(w, 10*sec) })
		}
	}
}

// progress sends a progress notification once every event up to the store's revision is on its way.
func (s *sim) progress(w *swatcher, every int64) {
	rev := s.st.rev
	t := max(s.now, w.lastT+1, w.brokenUntil)
	if s.now < w.lastT && s.bug("early-progress", 0.2) {
		t = s.now // ahead of events still on their way
	}
	w.lastT = max(w.lastT, t)
	s.at(t, func() {
		s.w.Watch(&history.WatchResponse{Watcher: w.id, Client: w.client, Time: t, Revision: rev, Progress: true})
		s.stats.WatchRecords++
	})
	if every > 0 && s.now+every < s.end {
		s.at(s.now+every, func() { s.progress(w, every) })
	}
}

// mainTick sends the next request of the open-loop main load.
func (s *sim) mainTick() {
	if s.now >= s.end {
		return
	}
	s.at(s.now+int64(float64(sec)/s.o.Rate), s.mainTick)
	x := s.rng.Float64() * 100
	switch {
	case x < 15:
		s.podGet()
	case x < 27:
		s.podCreate()
	case x < 49:
		s.podUpdate()
	case x < 57:
		s.podDelete()
	case x < 69:
		s.eventCreate()
	case x < 69.2:
		s.list("/registry/pods/", 500, "list/pods", 0, true)
	case x < 71.2:
		s.cacheList()
	case x < 75.2:
		s.serializableGet()
	case x < 75.22:
		s.list("/registry/events/", 500, "list/events", 0, false)
	case x < 76.22:
		s.keysOnly()
	case x < 85.22:
		s.configMap()
	default:
		s.podGet()
	}
}

func (s *sim) podName() string {
	s.podSeq++
	return fmt.Sprintf("/registry/pods/ns-%d/pod-%05d", s.podSeq%s.o.Namespaces, s.podSeq)
}

func (s *sim) randomPod() string {
	if len(s.pods) == 0 {
		return ""
	}
	return s.pods[s.rng.IntN(len(s.pods))]
}

func (s *sim) addPod(name string) {
	if _, ok := s.podIndex[name]; !ok {
		s.podIndex[name] = len(s.pods)
		s.pods = append(s.pods, name)
	}
}

func (s *sim) removePod(name string) {
	i, ok := s.podIndex[name]
	if !ok {
		return
	}
	last := s.pods[len(s.pods)-1]
	s.pods[i] = last
	s.podIndex[last] = i
	s.pods = s.pods[:len(s.pods)-1]
	delete(s.podIndex, name)
}

// known is the mod revision a controller believes a key has: the current one, or now and then an older
// one (a watch cache lagging behind), which makes the update's compare fail.
func (s *sim) known(key string) int64 {
	k := s.st.get(key)
	if k == nil || k.live() == nil {
		return 0
	}
	if n := len(k.versions); n > 1 && s.rng.IntN(10) == 0 {
		return k.versions[n-2].rev
	}
	return k.live().ModRevision
}

func put(key string, v history.Value, lease int64) history.Request {
	return history.Request{Kind: history.KindPut, Put: &history.Put{Key: key, Value: v, Lease: lease}}
}

func get(key string) history.Request {
	return history.Request{Kind: history.KindRange, Range: &history.Range{Key: key}}
}

// guaranteedUpdate is kube-apiserver's update: compare the mod revision it knows, else read the key.
func guaranteedUpdate(key string, known int64, then history.Request) history.Request {
	return history.Request{Kind: history.KindTxn, Txn: &history.Txn{
		Compares: []history.Compare{{Key: key, Target: history.CompareModRevision, Result: history.Equal, Operand: known}},
		Then:     []history.Request{then}, Else: []history.Request{get(key)}}}
}

func create(key string, then history.Request) history.Request {
	return history.Request{Kind: history.KindTxn, Txn: &history.Txn{
		Compares: []history.Compare{{Key: key, Target: history.CompareModRevision, Result: history.Equal, Operand: 0}},
		Then:     []history.Request{then}}}
}

func (s *sim) podGet() {
	key := s.randomPod()
	if key == "" {
		key = "/registry/pods/ns-0/missing"
	}
	r := get(key)
	r.Range.Limit = 1
	s.send("get/pods", r, nil)
}

func (s *sim) podCreate() {
	if len(s.pods) >= s.o.Pods {
		s.podUpdate()
		return
	}
	key := s.podName()
	s.send("create/pods", create(key, put(key, s.value(s.nextClient, 2048), 0)), nil)
	s.addPod(key)
}

func (s *sim) podUpdate() {
	key := s.randomPod()
	if key == "" {
		s.podCreate()
		return
	}
	s.send("update/pods", guaranteedUpdate(key, s.known(key), put(key, s.value(s.nextClient, 2048+s.rng.IntN(512)), 0)), nil)
}

func (s *sim) podDelete() {
	if len(s.pods) < s.o.Pods/2 {
		s.podCreate()
		return
	}
	key := s.randomPod()
	s.removePod(key)
	del := history.Request{Kind: history.KindDelete, Delete: &history.Delete{Key: key}}
	s.send("delete/pods", guaranteedUpdate(key, s.known(key), del), nil)
}

func (s *sim) eventCreate() {
	if s.eventLse == 0 {
		return
	}
	s.eventSeq++
	key := fmt.Sprintf("/registry/events/ns-%d/ev-%06d", s.eventSeq%s.o.Namespaces, s.eventSeq)
	s.send("create/events", create(key, put(key, s.value(s.nextClient, 600), s.eventLse)), nil)
}

// list is a paged, consistent list: the first page at the current revision, the next ones (when all is
// true) pinned to it.
func (s *sim) list(prefix string, limit int64, opname string, rev int64, all bool) {
	s.page(prefix, prefix, limit, opname, rev, all)
}

func (s *sim) page(prefix, from string, limit int64, opname string, rev int64, all bool) {
	r := history.Request{Kind: history.KindRange, Range: &history.Range{Key: from, End: prefixEnd(prefix), Limit: limit, Revision: rev}}
	s.send(opname, r, func(resp *history.Response, err error) {
		if !all || err != nil || resp == nil || !resp.Range.More || len(resp.Range.KVs) == 0 {
			return
		}
		at := rev
		if at == 0 {
			at = resp.Revision
		}
		next := resp.Range.KVs[len(resp.Range.KVs)-1].Key + "\x00"
		s.page(prefix, next, limit, opname, at, all)
	})
}

// cacheList is the consistent list from the watch cache: learn the current revision with a one-key
// range, then request progress on the pods watchers until they reach it.
func (s *sim) cacheList() {
	r := history.Request{Kind: history.KindRange, Range: &history.Range{Key: "/registry/pods/", End: prefixEnd("/registry/pods/"), Limit: 1}}
	a := s.rng.IntN(s.o.Apiservers)
	s.send("list/pods/cache", r, func(*history.Response, error) {
		for _, w := range s.watchers {
			if w.apiserver == a {
				s.progress(w, 0)
			}
		}
	})
}

func (s *sim) serializableGet() {
	key := s.randomPod()
	if key == "" {
		return
	}
	// A lagging member answers from a few revisions back.
	call := s.now
	c := s.client()
	lag := s.rng.Int64N(5)
	rev := max(s.st.rev-lag, s.st.compactRev, 1)
	r := history.Request{Kind: history.KindRange, Range: &history.Range{Key: key, Serializable: true}}
	rr, err := s.st.rangeAt(r.Range, rev)
	if s.bug("future-serializable", 0.05) {
		rev = s.st.rev + 50
	}
	ret := call + s.latency(call)
	s.at(ret, func() {
		op := history.Operation{Client: c, Op: "get/pods/serializable", Call: call, Return: ret, Request: r}
		if err != nil {
			op.Error = "other: " + err.Error()
		} else {
			op.Response = &history.Response{Revision: rev, Range: rr}
		}
		s.w.Operation(&op)
		s.stats.Operations++
		s.free = append(s.free, c)
	})
}

func (s *sim) keysOnly() {
	r := history.Request{Kind: history.KindRange, Range: &history.Range{Key: "/registry/pods/ns-1/", End: prefixEnd("/registry/pods/ns-1/"), KeysOnly: true, Limit: 50}}
	s.send("list/pods/keys", r, nil)
}

func (s *sim) configMap() {
	key := fmt.Sprintf("/registry/configmaps/default/cm-%02d", s.rng.IntN(40))
	if s.rng.IntN(8) == 0 {
		s.send("delete/configmaps", history.Request{Kind: history.KindDelete, Delete: &history.Delete{Key: key, PrevKV: true}}, nil)
		return
	}
	r := put(key, s.value(s.nextClient, 1024), 0)
	r.Put.PrevKV = s.rng.IntN(2) == 0
	s.send("put/configmaps", r, nil)
}

// nodeLease is a kubelet renewing its node lease every 10 s.
func (s *sim) nodeLease(i int) {
	if s.now >= s.end {
		return
	}
	key := fmt.Sprintf("/registry/leases/kube-node-lease/node-%03d", i)
	v := s.value(s.nextClient, 400)
	if known := s.known(key); known == 0 {
		s.send("create/leases", create(key, put(key, v, 0)), nil)
	} else {
		s.send("update/leases", guaranteedUpdate(key, known, put(key, v, 0)), nil)
	}
	s.at(s.now+10*sec, func() { s.nodeLease(i) })
}

// leaderElection is the scheduler's leader renewing its lease every 2 s and two standbys reading it.
func (s *sim) leaderElection() {
	if s.now >= s.end {
		return
	}
	key := "/registry/leases/kube-system/kube-scheduler"
	v := s.value(s.nextClient, 450)
	if known := s.known(key); known == 0 {
		s.send("create/leases", create(key, put(key, v, 0)), nil)
	} else {
		s.send("update/leases", guaranteedUpdate(key, known, put(key, v, 0)), nil)
	}
	for range 2 {
		s.send("get/leases", get(key), nil)
	}
	s.at(s.now+2*sec, s.leaderElection)
}

// masterLease is an apiserver's endpoint lease: a fresh 15 s lease every 10 s, attached by an update.
// When an update fails the old lease expires and takes the key with it.
func (s *sim) masterLease(i int) {
	if s.now >= s.end {
		return
	}
	key := fmt.Sprintf("/registry/masterleases/10.0.0.%d", i+1)
	s.send("grant/masterleases", history.Request{Kind: history.KindLeaseGrant, Lease: &history.Lease{TTL: 15}}, func(resp *history.Response, err error) {
		if err != nil {
			return
		}
		v := s.value(s.nextClient, 64)
		if known := s.known(key); known == 0 {
			s.send("create/masterleases", create(key, put(key, v, resp.Lease.ID)), nil)
		} else {
			s.send("update/masterleases", guaranteedUpdate(key, known, put(key, v, resp.Lease.ID)), nil)
		}
	})
	s.at(s.now+10*sec, func() { s.masterLease(i) })
}

// eventLease is the lease events share: TTL 1 hour, granted anew every 3 minutes.
func (s *sim) eventLease() {
	if s.now >= s.end {
		return
	}
	s.send("grant/events", history.Request{Kind: history.KindLeaseGrant, Lease: &history.Lease{TTL: 3660}}, func(resp *history.Response, err error) {
		if err == nil {
			s.eventLse = resp.Lease.ID
		}
	})
	s.at(s.now+180*sec, s.eventLease)
}

func (s *sim) health(i int) {
	if s.now >= s.end {
		return
	}
	s.send("get/health", get("/registry/health"), nil)
	s.at(s.now+sec, func() { s.health(i) })
}

// counter counts every resource once a minute, as kube-apiserver's storage metrics do.
func (s *sim) counter() {
	if s.now >= s.end {
		return
	}
	for _, p := range []string{"/registry/pods/", "/registry/events/", "/registry/leases/", "/registry/configmaps/"} {
		s.send("count", history.Request{Kind: history.KindRange, Range: &history.Range{Key: p, End: prefixEnd(p), CountOnly: true}}, nil)
	}
	s.at(s.now+30*sec, s.counter)
}

// compactor is kube-apiserver's compaction: win the compact_rev_key transaction, then compact to the
// revision seen one interval earlier.
func (s *sim) compactor() {
	if s.now >= s.end {
		return
	}
	key := "compact_rev_key"
	var version int64
	if k := s.st.get(key); k != nil && k.live() != nil {
		version = k.live().Version
	}
	target := s.compactPrev
	s.compactPrev = s.st.rev
	txn := history.Request{Kind: history.KindTxn, Txn: &history.Txn{
		Compares: []history.Compare{{Key: key, Target: history.CompareVersion, Result: history.Equal, Operand: version}},
		Then:     []history.Request{put(key, s.value(s.nextClient, 16), 0)}, Else: []history.Request{get(key)}}}
	s.send("compact/txn", txn, func(resp *history.Response, err error) {
		if err != nil || !resp.Txn.Succeeded || target == 0 {
			return
		}
		s.send("compact", history.Request{Kind: history.KindCompact, Compact: &history.Compact{Revision: target}}, func(_ *history.Response, err error) {
			if err == nil && target > 2 && s.bug("compacted-read", 1) {
				// A read below the compaction just acknowledged: etcd must refuse it.
				r := history.Request{Kind: history.KindRange, Range: &history.Range{Key: "/registry/pods/", End: prefixEnd("/registry/pods/"), Limit: 10, Revision: target - 1}}
				s.at(s.now+ms, func() { s.send("list/pods", r, nil) })
			}
		})
	})
	s.at(s.now+int64(s.o.CompactEvery), s.compactor)
}
