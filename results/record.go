// Package results turns the stream of operation records a run produces into latency histograms, throughput,
// error counts and the files of a run directory: summary.json, latency.hlog, timeseries.jsonl and, under
// hgrm/, two .hgrm files per operation. Memory is constant in the length of a run: records are folded into HDR histograms as they
// arrive and interval data is streamed to files.
package results

import (
	"time"
)

// Outcome is how an operation ended.
type Outcome uint8

// Outcomes. Failed is a transaction whose comparison failed (an optimistic-concurrency conflict): etcd
// answered, so it is not an error, but a workload usually retries it.
const (
	OK Outcome = iota
	Failed
	Error
)

// Miss says whether an operation started later than its slot in the schedule, and why.
type Miss uint8

// Schedule misses. Backlog: every client was busy when the slot came due (the system under test, or too
// few clients, held the generator back). Lag: a client was free but started late (the generator's CPU could
// not keep up). Both are counted; response times include the delay either way.
const (
	OnTime Miss = iota
	Backlog
	Lag
)

// Record is one operation as the recording wrapper saw it. Times are offsets from the run's start on the
// monotonic clock. Intended is when the schedule wanted the operation to start; Start is when it was sent.
type Record struct {
	Op       string
	Key      string
	Intended time.Duration
	Start    time.Duration
	End      time.Duration
	Outcome  Outcome
	ErrClass string
	Revision int64
	WriteID  uint64
	Miss     Miss
	// Access says whether the request wrote or read the key space, or neither (watch events, leases,
	// status): availability gaps are measured per access (see AccessOf and LongestGap).
	Access Access
}

// ServiceTime is how long etcd took to answer, from the actual send.
func (r *Record) ServiceTime() time.Duration { return r.End - r.Start }

// ResponseTime is how long the caller waited, from the intended start: it includes any schedule delay.
func (r *Record) ResponseTime() time.Duration { return r.End - r.Intended }

// Sink consumes records. Record must be safe for concurrent use; worker is a small integer identifying the
// calling worker, which sinks may use to spread lock contention. A Sink must not keep r after returning.
type Sink interface {
	Record(worker int, r *Record)
}
