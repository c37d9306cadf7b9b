package chaosbench

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"time"

	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/workloads/coord"
)

// splitRun is a worker's part in a split load: the reference it starts with, its clock against it, and
// the reference itself when this worker serves it (worker 0 of a Kubernetes Indexed Job).
type splitRun struct {
	index, workers int
	observer       bool // the coordinator's run that sends no load (worker containers)
	ref            string
	client         *coord.Client
	server         *coord.Server
	startAt        time.Time // on the reference clock
	clock          results.WorkerClock
	measured       bool // the clock was measured against a reference (not just --start-at)
}

// syncRoundTrips is how many round trips a worker measures its clock offset over.
const syncRoundTrips = 32

// joinSplit prepares a worker's run before anything starts: worker 0 serves the reference when it is
// the reference (--clock-ref names its own port), and every worker takes the seed from it. A worker sends
// only its share of the load and leaves the checks and thresholds to the merged run (which reads them
// from worker 0's settings); only worker 0 injects the faults.
func (s *Scenario) joinSplit(ctx context.Context, out io.Writer) (*splitRun, error) {
	if !s.IsWorker() {
		return nil, nil
	}
	sp := &splitRun{index: s.Worker, workers: s.Workers, ref: s.ClockRef, observer: s.observer}
	if s.Worker > 0 {
		// Worker 0 injects the faults and scrapes the members' metrics, once for the whole load.
		s.Faults.Schedule, s.ScrapeInterval = []string{"none"}, 0
	}
	if start, _ := s.startTime(); !start.IsZero() {
		sp.startAt = start
	}
	if s.ClockRef == "" {
		fmt.Fprintf(out, "worker %d of %d: starting at %s by this machine's clock (no --clock-ref: its offset is not measured)\n",
			s.Worker, s.Workers, sp.startAt.Format(time.RFC3339Nano))
		return sp, nil
	}
	if s.Worker == 0 && !s.coordinated && !s.ClockServed {
		if s.Seed == 0 {
			s.Seed = newSeed()
		}
		u, _ := url.Parse(s.ClockRef) // checked by validate
		srv, err := coord.Serve(net.JoinHostPort("", u.Port()), s.Seed, s.Workers)
		if err != nil {
			return nil, fmt.Errorf("worker 0 serves the reference clock: %w", err)
		}
		sp.server = srv
		fmt.Fprintf(out, "worker 0 of %d: serving the reference clock and the start on %s\n", s.Workers, srv.Addr())
	}
	sp.client = coord.NewClient(s.ClockRef)
	seed, workers, err := sp.client.Seed(ctx)
	if err != nil {
		sp.close()
		return nil, err
	}
	if workers != s.Workers {
		sp.close()
		return nil, fmt.Errorf("the reference %s splits the load over %d workers, this worker was given --workers %d", s.ClockRef, workers, s.Workers)
	}
	if s.Seed != 0 && s.Seed != seed {
		sp.close()
		return nil, fmt.Errorf("--seed %d differs from the reference's seed %d: every worker must send its share of the same plan", s.Seed, seed)
	}
	s.Seed = seed
	fmt.Fprintf(out, "%s: reference %s, seed %d\n", sp.name(), s.ClockRef, seed)
	return sp, nil
}

// startTogether waits for the common start: it measures the clock against the reference, reports the
// worker ready (set up and preloaded), and sleeps until the start time the reference hands out once
// every worker is, or until --start-at.
func (sp *splitRun) startTogether(ctx context.Context, out io.Writer) error {
	if sp.client != nil {
		off, err := sp.client.Sync(ctx, syncRoundTrips)
		if err != nil {
			return err
		}
		sp.measured = true
		sp.clock = results.WorkerClock{Reference: sp.ref, OffsetNs: int64(off.Offset), UncertaintyNs: int64(off.Uncertainty), RoundTrips: off.RoundTrips}
		if sp.startAt.IsZero() {
			wctx, cancel := context.WithTimeout(ctx, startWait)
			var start time.Time
			if sp.observer {
				start, err = sp.client.Start(wctx)
			} else {
				start, err = sp.client.Ready(wctx, sp.index)
			}
			cancel()
			if err != nil {
				return fmt.Errorf("worker %d: %w", sp.index, err)
			}
			sp.startAt = start
		}
	}
	local := sp.startAt.Add(-time.Duration(sp.clock.OffsetNs))
	fmt.Fprintf(out, "%s: clock offset %s ± %s; load starts at %s\n", sp.name(),
		time.Duration(sp.clock.OffsetNs), time.Duration(sp.clock.UncertaintyNs), sp.startAt.Format(time.RFC3339Nano))
	if d := time.Until(local); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	sp.clock.StartLateNs = int64(time.Since(local))
	return nil
}

// name names the run in its messages: "worker 2 of 3", or the observer.
func (sp *splitRun) name() string {
	if sp.observer {
		return fmt.Sprintf("coordinator of %d worker containers", sp.workers)
	}
	return fmt.Sprintf("worker %d of %d", sp.index, sp.workers)
}

// startWait bounds the wait for every worker to be ready: pods of a Job may wait for a node, an image.
const startWait = 10 * time.Minute

// summary is what the worker's summary.json records of the split.
func (sp *splitRun) summary() *results.Split {
	sum := &results.Split{Workers: sp.workers, Worker: sp.index, StartAt: sp.startAt, Observer: sp.observer}
	if sp.measured || !sp.startAt.IsZero() {
		c := sp.clock
		if !sp.measured {
			c.UncertaintyNs = -1 // unknown: the merge must be told (see MergeOptions.AssumeUncertainty)
		}
		sum.Clock = &c
	}
	return sum
}

func (sp *splitRun) close() {
	if sp != nil && sp.server != nil {
		sp.server.Close()
	}
}
