package faults

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// settling is a window in its recovery phase; its observation ends when the phase does, or when the next
// fault starts.
type settling struct {
	win   *results.Window
	cut   chan struct{}
	limit time.Duration // the observation ends by then
	once  sync.Once
	at    time.Duration
}

// end ends the observation (the first call decides when) and returns when it ended.
func (s *settling) end(now time.Duration) time.Duration {
	s.once.Do(func() {
		s.at = min(now, s.limit)
		if s.win != nil {
			s.win.Close(now)
		}
		close(s.cut)
	})
	return s.at
}

// cutSettling ends the recovery phase of every window still in one, at offset at.
func (r *Runner) cutSettling(at time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for st := range r.settling {
		st.end(at)
	}
}

// observe watches a healed window a while longer (its recovery phase) without holding up the next
// occurrence, and records it when the observation ends: Settle after the cluster recovered, at the next
// fault, or at Stop, whichever comes first; a window the cluster did not recover from ends at once.
// Without load there is nothing to observe: observations end with the load at the latest. Requests in
// flight when the observation ended still count for Grace.
func (r *Runner) observe(w results.FaultWindow, win *results.Window, end time.Duration) {
	limit := time.Duration(math.MaxInt64)
	if r.opts.Duration > 0 {
		limit = max(r.begin+r.opts.Duration, end)
	}
	st := &settling{win: win, cut: make(chan struct{}), limit: limit}
	r.mu.Lock()
	r.settling[st] = struct{}{}
	r.mu.Unlock()
	r.settleWg.Go(func() {
		if w.Outcome == OutcomeRecovered && r.ctx.Err() == nil {
			t := time.NewTimer(min(time.Duration(w.RecoveredNs)+r.opts.Settle, st.limit) - r.now())
			select {
			case <-t.C:
			case <-st.cut:
			case <-r.ctx.Done():
			}
			t.Stop()
		}
		r.mu.Lock()
		delete(r.settling, st)
		r.mu.Unlock()
		at := st.end(r.now())
		if win != nil {
			r.sleepUntil(at + r.opts.Grace) // requests in flight at the end still count
		}
		r.record(w, st, at)
	})
}

// record adds the availability figures of a window whose observation ended at offset at, and appends it to
// faults.jsonl.
func (r *Runner) record(w results.FaultWindow, st *settling, at time.Duration) {
	if st != nil && st.win != nil {
		a := st.win.Finalize(at)
		first, leader, changes := r.mon.elections(time.Duration(w.StartNs), at)
		a.LeaderChanges = changes
		if first >= 0 {
			ms := float64(first) / 1e6
			a.TimeToLeaderMs, a.NewLeader = &ms, leader
		}
		w.Availability = &a
	}
	w.Outcome = oneLine(w.Outcome) // errors.Join and panics spread over lines; the log has them in full
	r.mu.Lock()
	r.windows = append(r.windows, w)
	var werr error
	if r.file != nil {
		if b, err := json.Marshal(w); err == nil {
			_, werr = r.file.Write(append(b, '\n'))
		}
	}
	r.mu.Unlock()
	if werr != nil {
		r.problem(ProblemRunner, "", fmt.Sprintf("write %s: %v", results.FaultsFile, werr))
	}
}

// Windows returns the fault windows recorded so far, in start order after Stop.
func (r *Runner) Windows() []results.FaultWindow {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.windows)
}
