package workloads

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// follow consumes one logical watcher's watches until ctx ends, opening a new one whenever the current one
// ends (compacted, or closed by etcd) or WatchReopen says so.
func (l *watchLatencyLoad) follow(ctx context.Context, rec *Recorder, stream *WatchStream, w *Watch, stop context.CancelFunc, rnd *rand.Rand) {
	var last, seen int64 // the last event's revision (counted once), the highest revision any response named
	var tick <-chan time.Time
	if l.o.WatchProgress > 0 {
		t := time.NewTicker(l.o.WatchProgress)
		defer t.Stop()
		tick = t.C
	}
	for {
		var reopen <-chan time.Time
		if l.o.WatchReopen > 0 {
			reopen = time.After(l.o.WatchReopen)
		}
		compacted, reopened := int64(0), false
		// A progress request asked for on this watch and not answered yet: the watch is not closed before
		// an answer comes (at most progressWait), or it could reach the next watch on the stream. Requests
		// go on while one is unanswered: etcd 3.6 drops a request made while a watch of the stream is
		// still catching up (3.5.8 to 3.5.x defer it), so waiting for its answer would wait for nothing.
		var asked bool
		var due <-chan time.Time
	consume:
		for {
			select {
			case <-tick:
				select {
				case <-w.Ready:
				default:
					continue // not created yet: the answer could precede the watch
				}
				if stream.c.Call(ctx, nil, "progress", func(ctx context.Context) (int64, error) {
					return 0, stream.RequestProgress(ctx)
				}) == nil {
					asked = true
				}
			case <-due:
				reopened = true
				break consume
			case resp, ok := <-w.C:
				if !ok {
					break consume
				}
				if resp.CompactRevision > 0 {
					compacted = resp.CompactRevision
				}
				last, seen = l.timeEvents(rec, w, resp, last, seen)
				if resp.Progress {
					asked = false
					if due != nil {
						reopened = true
						break consume
					}
				}
			case <-reopen:
				if asked {
					due = time.After(progressWait)
					continue
				}
				reopened = true
				break consume
			}
		}
		stop()
		if reopened {
			for range w.C { // drain until the client confirms the close
			}
		}
		if ctx.Err() != nil {
			return
		}
		from := l.reopenFrom(rnd, last, seen, compacted, reopened)
		if compacted == 0 && !reopened {
			// Closed by etcd for another reason (a member going away): a client backs off, then watches again.
			select {
			case <-ctx.Done():
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
		var octx context.Context
		octx, stop = context.WithCancel(ctx)
		w = stream.Watch(octx, history.WatchRequest{Key: l.key, PrevKV: l.o.PrevKV, Revision: from})
	}
}

// progressWait bounds how long a watcher due to re-open waits for the answer to its progress request.
const progressWait = time.Second

// timeEvents records the watch latency of the response's new events (a re-opened watch delivers again
// what the last one did) and returns the last event's revision and the highest revision seen.
func (l *watchLatencyLoad) timeEvents(rec *Recorder, w *Watch, resp history.WatchResponse, last, seen int64) (int64, int64) {
	seen = max(seen, resp.Revision)
	for _, ev := range resp.Events {
		seen = max(seen, ev.KV.ModRevision)
		if ev.KV.ModRevision <= last {
			continue // delivered again by a re-opened watch: counted for latency already
		}
		last = ev.KV.ModRevision
		if ev.Type != history.EventPut {
			continue // a delete carries no write id to time
		}
		at := time.Duration(resp.Time)
		if ack, ok := l.delivery.Received(ev.KV.Value.ID, at); ok {
			rec.record(w.Client, &results.Record{Op: "watch", Key: ev.KV.Key, Intended: ack, Start: ack, End: max(at, ack), Revision: ev.KV.ModRevision, WriteID: ev.KV.Value.ID})
		}
	}
	return last, seen
}

// reopenFrom is the revision the next watch starts from: after the last event, from the compaction
// revision when the watch was compacted (the lowest etcd still has), or, re-opened by choice, from a past
// or a future revision as --watch-from says.
func (l *watchLatencyLoad) reopenFrom(rnd *rand.Rand, last, seen, compacted int64, reopened bool) int64 {
	switch {
	case compacted > 0:
		return compacted
	case reopened && l.o.WatchFrom == WatchFromPast:
		return max(1, last-rnd.Int64N(64))
	case reopened && l.o.WatchFrom == WatchFromFuture:
		return max(seen, last) + 1 + rnd.Int64N(8)
	}
	return last + 1
}
