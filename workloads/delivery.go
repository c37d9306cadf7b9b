package workloads

import (
	"sync"
	"time"
)

// Delivery matches writes to the watch events that deliver them, to measure watch delivery latency: from
// the write's acknowledgement to the client to each event's arrival. An event can arrive before the
// acknowledgement; it then counts as zero latency, as in etcd's benchmark.
//
// Memory is bounded by writes in flight: a write is forgotten when every receiver has seen it, or a minute
// after its acknowledgement or first event when some never do (a watcher that was cancelled or restarted, a
// write that failed on the client but took effect).
type Delivery struct {
	mu        sync.Mutex
	receivers int
	pending   map[uint64]*pendingWrite
	acks      uint64
}

type pendingWrite struct {
	first time.Duration // when the first event or the acknowledgement came
	ack   time.Duration
	acked bool
	early int // events that arrived before the acknowledgement
	seen  int
}

// NewDelivery tracks writes each of which receivers watchers will see.
func NewDelivery(receivers int) *Delivery {
	return &Delivery{receivers: receivers, pending: map[uint64]*pendingWrite{}}
}

// Acked records that write id was acknowledged at t, and returns how many of its events arrived before.
func (d *Delivery) Acked(id uint64, t time.Duration) (early int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.acks++
	if d.acks%4096 == 0 {
		d.sweep(t - time.Minute)
	}
	p := d.pending[id]
	if p == nil {
		p = &pendingWrite{first: t}
		d.pending[id] = p
	}
	p.ack, p.acked = t, true
	early = p.early
	if p.seen >= d.receivers {
		delete(d.pending, id)
	}
	return early
}

// Received records one event of write id arriving at t. It returns the write's acknowledgement time when
// that is already known; otherwise the event is counted as early and ok is false.
func (d *Delivery) Received(id uint64, t time.Duration) (ack time.Duration, ok bool) {
	if id == 0 {
		return 0, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	p := d.pending[id]
	if p == nil {
		p = &pendingWrite{first: t}
		d.pending[id] = p
	}
	p.seen++
	if !p.acked {
		p.early++
		return 0, false
	}
	if p.seen >= d.receivers {
		delete(d.pending, id)
	}
	return p.ack, true
}

// Forget drops a write that failed.
func (d *Delivery) Forget(id uint64) {
	d.mu.Lock()
	delete(d.pending, id)
	d.mu.Unlock()
}

// Pending returns the number of acknowledged writes still waiting for events.
func (d *Delivery) Pending() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, p := range d.pending {
		if p.acked {
			n++
		}
	}
	return n
}

// sweep forgets writes acknowledged before before, and writes never acknowledged whose first event came
// before it (a write that failed on the client but took effect).
func (d *Delivery) sweep(before time.Duration) {
	for id, p := range d.pending {
		if p.first < before {
			delete(d.pending, id)
		}
	}
}
