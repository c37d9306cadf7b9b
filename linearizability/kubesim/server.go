package kubesim

// The simulated etcd's front: each request gets a client, a service time and, in a fault window, maybe a
// timeout after which it may still take effect; it is applied to the store at one instant and recorded at
// its return, as the recording wrapper of a real run does.

import (
	"fmt"
	"math"
	"time"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// timeout is how long a client waits in a fault window before it gives up on a request.
const timeout = 5 * sec

// client takes an idle client id, or a new one, so that no client has two requests in flight.
func (s *sim) client() int {
	if n := len(s.free); n > 0 {
		c := s.free[n-1]
		s.free = s.free[:n-1]
		return c
	}
	s.nextClient++
	return s.nextClient - 1
}

// value is a new value of the given size whose write id no other value of the run has, so that every
// read names the write it shows.
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

// isWrite reports whether a request changes the store, so that a timed-out one may take effect anyway.
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
