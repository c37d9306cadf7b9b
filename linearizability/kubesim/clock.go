package kubesim

// The simulation runs on a virtual clock: every actor, request and watch delivery is an event at a
// virtual time, so a run is as fast as the machine and the same for a seed.

import (
	"container/heap"
	"time"
)

const (
	ms  = int64(time.Millisecond)
	sec = int64(time.Second)
)

// event is something to do at virtual time t; seq keeps events of one instant in the order they were
// scheduled, so that a seed always replays the same run.
type event struct {
	t   int64
	seq int64
	fn  func()
}

// queue is the pending events as a heap, earliest first.
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

// at schedules fn at virtual time t.
func (s *sim) at(t int64, fn func()) {
	s.seq++
	heap.Push(&s.q, event{t: t, seq: s.seq, fn: fn})
}

// drain runs the scheduled events in time order, moving the clock to each, until none is left: actors
// stop rescheduling themselves at the end of the load, so the queue empties once the last request and
// watch response are written.
func (s *sim) drain() {
	for s.q.Len() > 0 {
		e := heap.Pop(&s.q).(event)
		s.now = e.t
		e.fn()
	}
}
