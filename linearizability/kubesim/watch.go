package kubesim

// The apiservers' watch caches: a watcher per resource and apiserver, sent every write's changes in
// revision order and progress notifications, the way etcd serves them; the bugs that break watch
// guarantees are made here.

import "github.com/etcd-chaosbench/chaosbench/results/history"

// swatcher is one watch stream. lastT is when its latest response arrives, so that later ones arrive
// after it; brokenUntil holds responses back while a fault window has the stream broken.
type swatcher struct {
	id, client  int
	req         history.WatchRequest
	apiserver   int
	lastT       int64
	brokenUntil int64
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

// deliver writes a watch response at its arrival time t.
func (s *sim) deliver(w *swatcher, t, rev int64, evs []history.Event) {
	s.at(t, func() {
		s.w.Watch(&history.WatchResponse{Watcher: w.id, Client: w.client, Time: t, Revision: rev, Events: evs})
		s.stats.WatchRecords++
		s.stats.WatchEvents += len(evs)
	})
}

// inRange reports whether key k lies in etcd range [key, end).
func inRange(k, key, end string) bool {
	if end == "" {
		return k == key
	}
	return k >= key && (end == "\x00" || k < end)
}

// prefixEnd is the range end that covers every key with prefix p (whose last byte is never 0xff here).
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
