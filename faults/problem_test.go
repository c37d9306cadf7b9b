package faults

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters"
)

// Tests that a schedule which did not do what it asked for says so, one typed problem per shortfall, on
// real clusters. Windows are observed briefly (Settle, Grace) to keep each test short.

// signalLog passes the runner's lines to the test log and signals the first line containing match. With
// hold set it also holds that line's writer until hold is closed: a log sink that stalls (a terminal or a
// pipe nobody reads) while the fault that just logged is in effect.
type signalLog struct {
	t     *testing.T
	match string
	hold  chan struct{}
	once  sync.Once
	seen  chan struct{}
}

func newSignalLog(t *testing.T, match string, hold chan struct{}) *signalLog {
	return &signalLog{t: t, match: match, hold: hold, seen: make(chan struct{})}
}

func (w *signalLog) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	if strings.Contains(string(b), w.match) {
		first := false
		w.once.Do(func() { first = true; close(w.seen) })
		if first && w.hold != nil {
			<-w.hold
		}
	}
	return len(b), nil
}

func (w *signalLog) wait(t *testing.T, timeout time.Duration) {
	t.Helper()
	select {
	case <-w.seen:
	case <-time.After(timeout):
		t.Fatalf("no log line with %q within %s", w.match, timeout)
	}
}

// startSchedule starts a runner for specs on c and begins the load at once.
func startSchedule(t *testing.T, c clusters.Cluster, specs []string, opts Options) *Runner {
	t.Helper()
	sched, err := Parse(specs)
	if err != nil {
		t.Fatal(err)
	}
	opts.Base = time.Now()
	opts.Settle, opts.Grace = 100*time.Millisecond, 100*time.Millisecond
	if opts.Log == nil {
		opts.Log = logWriter{t}
	}
	r, err := Start(c, sched, opts)
	if err != nil {
		t.Fatal(err)
	}
	r.Begin(time.Since(opts.Base))
	return r
}

// waitUntil polls cond until it holds or timeout passes.
func waitUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func kindsOf(ps []Problem) []ProblemKind {
	out := make([]ProblemKind, len(ps))
	for i, p := range ps {
		out[i] = p.Kind
	}
	return out
}

// checkLines checks that every problem is one line naming its fault, and that Errors says the same.
func checkLines(t *testing.T, r *Runner) {
	t.Helper()
	ps, errs := r.Problems(), r.Errors()
	if len(ps) != len(errs) {
		t.Fatalf("%d problems but %d errors", len(ps), len(errs))
	}
	for i, p := range ps {
		line := p.String()
		if strings.Contains(line, "\n") || p.Text == "" || errs[i] != line {
			t.Errorf("problem %d is not one clear line (or Errors differs): %q / %q", i, line, errs[i])
		}
		if p.Fault != "" && !strings.HasPrefix(line, "fault "+p.Fault+": ") {
			t.Errorf("problem %q does not name its fault first", line)
		}
	}
}

// TestProblems drives each cheap shortfall through a runner on one real single-member cluster: every case
// must report exactly the problems it causes, and a schedule that ran as asked none.
func TestProblems(t *testing.T) {
	t.Parallel() // judges behaviour, not latency (see TestMain)
	c := startCluster(t, clusters.EmbedOptions{Members: 1})
	member := clusters.Processes(c)[0]
	recorded := func(r *Runner) bool { return len(r.Windows())+len(r.Problems()) > 0 }
	for _, tc := range []struct {
		name   string
		specs  []string
		opts   Options
		before func(t *testing.T) // runs before the runner starts
		after  func(t *testing.T) // runs once the problems are in, before Stop
		until  func(r *Runner) bool
		reason StopReason
		want   []ProblemKind
		text   string // in the first problem's line
		stop   error  // Stop's error wraps it
	}{
		{name: "a defrag that ran is no problem", specs: []string{"defrag@0s"}, until: recorded},
		{name: "a compaction burst with nothing new to compact is no problem", specs: []string{"compact=100ms@0s+600ms"},
			until: func(r *Runner) bool { return len(r.Windows()) > 0 }},
		{name: "a fault unavailable on the cluster is skipped", specs: []string{"partition:random@0s+1s"}, until: recorded,
			want: []ProblemKind{ProblemSkipped}, text: "fault partition:random@0s+1s: skipped: unavailable: a partition needs at least 2 members"},
		{name: "an unhealthy cluster skips the fault", specs: []string{"defrag@0s"}, opts: Options{HealthTimeout: 500 * time.Millisecond},
			before: func(t *testing.T) {
				if err := member.Pause(context.Background()); err != nil {
					t.Fatal(err)
				}
			},
			after: func(t *testing.T) {
				if err := member.Resume(context.Background()); err != nil {
					t.Fatal(err)
				}
			},
			until: recorded, want: []ProblemKind{ProblemSkipped}, text: "fault defrag@0s: skipped: cluster not healthy before the fault"},
		{name: "a nemesis with nothing available injects nothing", specs: []string{"nemesis=partition|delay|replace@0s+1s"}, until: recorded,
			want: []ProblemKind{ProblemNothingInjected},
			text: "fault nemesis=partition|delay|replace@0s+1s: nothing injected: no fault of the nemesis is available on this cluster (partition: "},
		{name: "jitter past the load's end injects nothing", specs: []string{"kill:random@1900ms~1h+1s"}, opts: Options{Duration: 2 * time.Second},
			until: recorded, want: []ProblemKind{ProblemNothingInjected}, text: "never ran: with its jitter it was due at"},
		{name: "a load that ended before the fault's time injected nothing", specs: []string{"pause:random@30s+1s"},
			opts: Options{Duration: time.Minute}, want: []ProblemKind{ProblemNothingInjected},
			text: "fault pause:random@30s+1s: did not start: the load ended before its time (due at 30.00s)"},
		// Each kill's restart takes longer than the period, so the occurrences fall behind. The next kill
		// starts as soon as a window is recorded: the load ends 150 ms later, inside that kill's hold or
		// restart, never inside its inject (which an ending load would cut as a failed inject).
		{name: "an occurrence its predecessors pushed past the load's end injected nothing", specs: []string{"kill:random@0s+100ms/200ms"},
			opts: Options{Duration: time.Minute}, until: func(r *Runner) bool { return len(r.Windows()) >= 2 },
			after: func(*testing.T) { time.Sleep(150 * time.Millisecond) },
			want:  []ProblemKind{ProblemNothingInjected}, text: "it waited for the occurrences before it, which each took longer than the 200ms between them, until the load ended at"},
		{name: "an interrupted run before the fault's time is no problem of the schedule", specs: []string{"pause:random@30s+1s"},
			opts: Options{Duration: time.Minute}, reason: Interrupted},
		{name: "a target that does not exist fails the inject", specs: []string{"defrag:m9@0s"}, until: recorded,
			want: []ProblemKind{ProblemInjectFailed}, text: "fault defrag:m9@0s: inject failed: resolve target m9", stop: ErrInjectFailed},
		// A recovery bound nobody can meet: the not-recovered path without breaking the cluster.
		{name: "a cluster not healthy within the recovery bound did not recover", specs: []string{"defrag@0s"},
			opts: Options{RecoveryTimeout: time.Nanosecond}, until: recorded,
			want: []ProblemKind{ProblemNotRecovered}, text: "fault defrag@0s: not recovered within 1ns", stop: ErrNotRecovered},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.before != nil {
				tc.before(t)
			}
			r := startSchedule(t, c, tc.specs, tc.opts)
			if tc.until != nil {
				waitUntil(t, 10*time.Second, "a window or a problem", func() bool { return tc.until(r) })
			}
			if tc.after != nil {
				tc.after(t) // before Stop, whose final sweep would otherwise undo it (and say so)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			err := r.Stop(ctx, tc.reason)
			ps := r.Problems()
			for _, p := range ps {
				t.Logf("problem %s: %s", p.Kind, p)
			}
			if got := kindsOf(ps); !slices.Equal(got, tc.want) {
				t.Fatalf("problems %v, want %v", got, tc.want)
			}
			if len(ps) > 0 && !strings.Contains(ps[0].String(), tc.text) {
				t.Errorf("problem %q does not say %q", ps[0], tc.text)
			}
			checkLines(t, r)
			if (tc.stop == nil) != (err == nil) || (tc.stop != nil && !errors.Is(err, tc.stop)) {
				t.Errorf("Stop: %v, want %v", err, tc.stop)
			}
		})
	}
}

// TestProblemCompactionFailed: compactions of a burst that fail after the first one succeeded are
// reported, not only logged. The only member stops during the burst, so the next compaction cannot read
// the revision (it gives up after its 10 s timeout).
func TestProblemCompactionFailed(t *testing.T) {
	t.Parallel() // judges behaviour, not latency (see TestMain)
	c := startCluster(t, clusters.EmbedOptions{Members: 1})
	log := newSignalLog(t, "injected at", nil)
	r := startSchedule(t, c, []string{"compact=100ms@0s+1s"}, Options{Log: log, RecoveryTimeout: 500 * time.Millisecond})
	log.wait(t, 10*time.Second)
	ctx := context.Background()
	member := clusters.Processes(c)[0]
	if err := member.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 20*time.Second, "the window", func() bool { return len(r.Windows()) > 0 })
	sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	err := r.Stop(sctx, LoadEnded)
	ps := r.Problems()
	for _, p := range ps {
		t.Logf("problem %s: %s", p.Kind, p)
	}
	// The member is still down after the burst: the window did not recover either.
	if got, want := kindsOf(ps), []ProblemKind{ProblemCompactionFailed, ProblemNotRecovered}; !slices.Equal(got, want) {
		t.Fatalf("problems %v, want %v", got, want)
	}
	if !strings.Contains(ps[0].String(), "fault compact=100ms@0s+1s: compaction burst: 1 of ") || !strings.Contains(ps[0].Text, "failed; first: compact: read revision") {
		t.Errorf("compaction problem: %q", ps[0])
	}
	checkLines(t, r)
	if !errors.Is(err, ErrNotRecovered) {
		t.Errorf("Stop: %v", err)
	}
	if err := member.Start(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestProblemSweepHealed: a delay still in effect when Stop's time runs out is healed by the final sweep,
// and each proxy the sweep had to heal is a problem naming the delay. The fault's goroutine is held after
// the inject by its log sink stalling, as a terminal or pipe nobody reads would hold it.
func TestProblemSweepHealed(t *testing.T) {
	c := startCluster(t, clusters.EmbedOptions{})
	hold := make(chan struct{})
	log := newSignalLog(t, "injected at", hold)
	const spec = "delay:all=50ms@0s+10s"
	r := startSchedule(t, c, []string{spec}, Options{Log: log})
	released := false
	release := func() {
		if !released {
			released = true
			close(hold)
			r.wg.Wait()
			r.settleWg.Wait()
		}
	}
	defer release()
	log.wait(t, 10*time.Second)
	shaped := func() (n int) {
		for _, m := range c.Members() {
			if c.Proxy(m.Name()).Shaped() {
				n++
			}
		}
		return n
	}
	if shaped() != 3 {
		t.Fatalf("%d of 3 proxies shaped after the inject", shaped())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	r.Stop(ctx, LoadEnded)
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Stop took %v with a 300ms cleanup budget", d)
	}
	if n := shaped(); n != 0 {
		t.Fatalf("%d proxies still shaped after Stop", n)
	}
	ps := r.Problems()
	for _, p := range ps {
		t.Logf("problem %s: %s", p.Kind, p)
	}
	want := []ProblemKind{ProblemRunner, ProblemSweepHealed, ProblemSweepHealed, ProblemSweepHealed}
	if got := kindsOf(ps); !slices.Equal(got, want) {
		t.Fatalf("problems %v, want %v", got, want)
	}
	for _, p := range ps {
		if p.Fault != spec {
			t.Errorf("problem %q does not name the delay", p)
		}
	}
	if !strings.Contains(ps[1].Text, "peer proxy of m1 was still shaped at the end; healed by the final sweep") {
		t.Errorf("sweep problem: %q", ps[1])
	}
	checkLines(t, r)
	release()
}
