package chaosbench

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results/live"
	"github.com/etcd-chaosbench/chaosbench/workloads"
)

// ExploreOptions is what `chaosbench explore` searches.
type ExploreOptions struct {
	// EtcdVersion is the release (or pseudo-version) every scenario runs on; Failpoints runs its failpoint
	// build and lets the search pick failpoint faults.
	EtcdVersion string
	Failpoints  bool
	// Workload, when set, is the only workload the search draws (one of exploreWorkloads): the rest of the
	// scenario (shape, cluster, faults) is still drawn.
	Workload string
	// Seed drives every random choice of the search (0 picks one, printed); each run's seed derives from it.
	Seed int64
	// Count and For bound the search: it stops after Count scenarios or once For has passed (whichever
	// comes first; at least one of them), or at the first finding.
	Count int
	For   time.Duration
	// MaxLoad is the longest load a scenario gets.
	MaxLoad time.Duration
	// Tries is how many seeds a shrinking candidate runs with: failures are intermittent, so a candidate
	// still fails when at least half of them fail the way the finding did (its outcome's kind), and the
	// scenario written reproduces at least as often as that (the rate is measured again and stated).
	Tries int
	// Out is the directory of every run and of the scenario file the search writes.
	Out string
}

// ExploreCase is one scenario of the search: what it may vary and shrink.
type ExploreCase struct {
	Members     int
	Workload    string
	Rate        float64
	Clients     int
	Duration    time.Duration
	KeySpace    int
	DeleteRatio float64
	WatchReopen time.Duration
	WatchFrom   string
	// WatchProgress makes every watcher (one per stream) ask for a progress notification this often.
	WatchProgress time.Duration
	EtcdFlags     []string
	Faults        []string
}

// exploreWorkloads are the workloads the search picks from, simplest first (shrinking moves towards put).
var exploreWorkloads = []string{"put", "txn-put", "txn-mixed", "watch-latency"}

// randomCase draws one scenario: workload (workload, when set) and its shape, cluster size, etcd settings,
// one to three faults.
func randomCase(r *rand.Rand, failpoints bool, maxLoad time.Duration, workload string) ExploreCase {
	c := ExploreCase{
		Members:  []int{1, 3, 3, 3, 5}[r.IntN(5)],
		Workload: exploreWorkloads[r.IntN(len(exploreWorkloads))],
		Rate:     float64(100 * (1 + r.IntN(5))),
		Clients:  []int{4, 8, 16, 32}[r.IntN(4)],
		KeySpace: []int{10, 100, 1000}[r.IntN(3)],
	}
	minLoad := 20 * time.Second
	c.Duration = minLoad + time.Duration(r.Int64N(int64(max(maxLoad-minLoad, time.Second))))
	c.Duration = c.Duration.Round(time.Second)
	if r.IntN(2) == 0 {
		c.DeleteRatio = 0.2
	}
	if workload != "" {
		c.Workload = workload
	}
	if c.Workload == "watch-latency" && r.IntN(2) == 0 {
		c.WatchReopen = 500 * time.Millisecond
		c.WatchFrom = []string{workloads.WatchFromNext, workloads.WatchFromPast, workloads.WatchFromFuture}[r.IntN(3)]
	}
	if c.Workload == "watch-latency" && r.IntN(2) == 0 {
		c.WatchProgress = 50 * time.Millisecond
	}
	kinds := []string{"kill:random", "kill:leader", "kill:random=drop-unsynced", "pause:random", "compact=1s", "defrag:all"}
	if c.Members > 1 {
		kinds = append(kinds, "partition:leader", "partition:follower", "partition:follower=until-snapshot",
			"partition:follower=until-snapshot|refuse")
	}
	if failpoints {
		kinds = append(kinds, "failpoint:random=raftBeforeSave:panic", "failpoint:random=raftAfterSave:panic",
			"failpoint:random=defragBeforeRename:panic+defrag", "failpoint:leader=raftBeforeLeaderSend:panic")
	}
	secs := int(c.Duration / time.Second)
	var plan faultPlan
	for range 1 + r.IntN(3) {
		k := kinds[r.IntN(len(kinds))]
		start := 3 + r.IntN(max(secs-12, 1))
		long := 2 + r.IntN(4)
		switch {
		case k == "compact=1s":
			c.Faults = append(c.Faults, fmt.Sprintf("compact=1s@%ds+%ds", start, 5+r.IntN(6)))
		case k == "defrag:all":
			c.Faults = append(c.Faults, fmt.Sprintf("defrag:all@%ds", start))
		case strings.HasSuffix(k, "+defrag"):
			if plan.place(faultSpan{"failpoint", start, start + 4}) {
				c.Faults = append(c.Faults, fmt.Sprintf("%s@%ds+4s", strings.TrimSuffix(k, "+defrag"), start), fmt.Sprintf("defrag:all@%ds", start+1))
			}
		case strings.Contains(k, "until-snapshot"):
			// The window is the longest the partition may last: it heals as soon as the leader has
			// compacted its log past the follower, which these settings make a matter of 200 entries.
			if plan.place(faultSpan{"snapshot", start, start + 20}) {
				c.Faults = append(c.Faults, fmt.Sprintf("%s@%ds+20s", k, start))
				c.EtcdFlags = []string{"snapshot-count=100", "snapshot-catchup-entries=100"}
			}
		default:
			var class string
			switch {
			case strings.HasPrefix(k, "kill"), strings.HasPrefix(k, "failpoint"):
				class, _, _ = strings.Cut(k, ":")
			case strings.HasPrefix(k, "pause"), strings.HasPrefix(k, "partition"):
				class = "down"
			}
			if plan.place(faultSpan{class, start, start + long}) {
				c.Faults = append(c.Faults, fmt.Sprintf("%s@%ds+%ds", k, start, long))
			}
		}
	}
	return c
}

// faultSpan is one fault window of a random case, in seconds from the start of the load.
type faultSpan struct {
	class    string // "kill", "failpoint", "snapshot", or "down" (a pause, a partition)
	from, to int
}

// faultPlan keeps the fault windows of a random case that would undo each other out of each other's way
// (with 5 s of recovery after each), so that every fault drawn can take effect: a kill restarts its
// member, which clears a failpoint armed in it, and two failpoints may pick one member, where the
// second's crash or restart takes the first's with it; a follower cut off until a snapshot needs the
// others to make progress and keep their leader until the leader has compacted past it, which a member
// down or cut off besides (with three members: no quorum) or a new leader prevents. And a leader does not
// compact its log for 30 s after it sent a snapshot, which any of these faults may have made it send (at
// snapshot-count 100 a follower cut off for a second needs one): a partition until a snapshot starts
// 35 s after them.
type faultPlan struct {
	taken []faultSpan
}

// conflicts says whether a window of class a may not meet one of class b.
func (faultPlan) conflicts(a, b string) bool {
	switch a {
	case "kill":
		return b == "failpoint" || b == "snapshot"
	case "failpoint":
		return b == "kill" || b == "failpoint" || b == "snapshot"
	case "snapshot":
		return true
	case "down":
		return b == "snapshot"
	}
	return false
}

// gap is how long after the end of a window the next one, next, may start.
func (faultPlan) gap(next faultSpan) int {
	if next.class == "snapshot" {
		return 35
	}
	return 5
}

// place keeps window w unless it meets one of a class it conflicts with.
func (p *faultPlan) place(w faultSpan) bool {
	if slices.ContainsFunc(p.taken, func(o faultSpan) bool {
		apart := w.to+p.gap(o) <= o.from || o.to+p.gap(w) <= w.from
		return p.conflicts(w.class, o.class) && !apart
	}) {
		return false
	}
	p.taken = append(p.taken, w)
	return true
}

// Scenario is the case as a run: on release v (with failpoints), with seed.
func (c ExploreCase) Scenario(v string, failpoints bool, seed int64, out string) Scenario {
	s := DefaultScenario()
	s.Name, s.Out, s.Seed = "explore", out, seed
	s.EtcdVersion, s.Failpoints = v, failpoints
	s.Members, s.Workload, s.Rate, s.Clients, s.Conns = c.Members, c.Workload, c.Rate, c.Clients, min(c.Clients, 4)
	s.Duration, s.RequestTimeout, s.Progress = c.Duration, 2*time.Second, live.ProgressNone
	s.Micro.KeySpaceSize, s.Micro.DeleteRatio = c.KeySpace, c.DeleteRatio
	s.Micro.WatchStreams, s.Micro.WatchersPerStream, s.Micro.PrevKV = 2, 4, true
	s.Micro.WatchReopen = c.WatchReopen
	if c.WatchProgress > 0 {
		// A progress request answers for every watch of its stream: one watcher per stream, as
		// --watch-progress requires.
		s.Micro.WatchStreams, s.Micro.WatchersPerStream, s.Micro.WatchProgress = 8, 1, c.WatchProgress
	}
	if c.WatchFrom != "" {
		s.Micro.WatchFrom = c.WatchFrom
	}
	s.EtcdFlags = slices.Clone(c.EtcdFlags)
	s.Faults.Schedule = slices.Clone(c.Faults)
	if len(c.Faults) == 0 {
		s.Faults.Schedule = []string{"none"}
	}
	return s
}

// shrinkStep is one step of shrinking: what it cuts (a fault by its spec, "duration", "members", ...) and
// the case without it.
type shrinkStep struct {
	cut string
	c   ExploreCase
}

// Smaller returns the cases one shrinking step away from c, the biggest cut first: a fault fewer, fewer
// members, half the load, half the clients, half the rate, a tenth of the keys, a simpler workload, no
// deletes, no re-opened watches, no progress requests. Every one is strictly smaller, so that shrinking
// ends.
func (c ExploreCase) Smaller() []ExploreCase {
	var out []ExploreCase
	for _, st := range c.steps() {
		out = append(out, st.c)
	}
	return out
}

// steps is Smaller with what each step cuts.
func (c ExploreCase) steps() []shrinkStep {
	var out []shrinkStep
	add := func(cut string, d ExploreCase) { out = append(out, shrinkStep{cut, d}) }
	for i, f := range c.Faults {
		d := c
		d.Faults = slices.Delete(slices.Clone(c.Faults), i, i+1)
		if !slices.ContainsFunc(d.Faults, func(f string) bool { return strings.Contains(f, "until-snapshot") }) {
			d.EtcdFlags = nil
		}
		add("fault "+f, d)
	}
	if d := c; c.Members > 1 {
		d.Members = map[int]int{5: 3, 3: 1}[c.Members]
		add("members", d)
	}
	if d := c; c.Duration >= 20*time.Second {
		d.Duration = (c.Duration / 2).Round(time.Second)
		add("duration", d)
	}
	if d := c; c.Clients > 2 {
		d.Clients = c.Clients / 2
		add("clients", d)
	}
	if d := c; c.Rate > 50 {
		d.Rate = c.Rate / 2
		add("rate", d)
	}
	if d := c; c.KeySpace >= 20 {
		d.KeySpace = c.KeySpace / 10
		add("keys", d)
	}
	if i := slices.Index(exploreWorkloads, c.Workload); i > 0 {
		d := c
		d.Workload = exploreWorkloads[i-1]
		if d.Workload != "watch-latency" {
			d.WatchReopen, d.WatchFrom, d.WatchProgress = 0, "", 0
		}
		add("workload", d)
	}
	if d := c; c.DeleteRatio > 0 {
		d.DeleteRatio = 0
		add("deletes", d)
	}
	if d := c; c.WatchReopen > 0 {
		d.WatchReopen, d.WatchFrom = 0, ""
		add("re-opened watches", d)
	}
	if d := c; c.WatchProgress > 0 {
		d.WatchProgress = 0
		add("progress requests", d)
	}
	return out
}

// Shrink returns the smallest case reachable from c, one step of Smaller at a time, for which fails still
// holds (greedy: the first smaller case that still fails is taken, and shrinking starts again from it).
// fails is asked about c's smaller cases only; c itself is known to fail. A cut whose case did not fail is
// not tried again on the smaller cases that follow: what the failure needed on a bigger case it needs on
// a smaller one too, as a rule, and each try is several runs of etcd.
func Shrink(ctx context.Context, c ExploreCase, fails func(ExploreCase) bool) ExploreCase {
	needed := map[string]bool{}
	for ctx.Err() == nil {
		next := false
		for _, st := range c.steps() {
			if ctx.Err() != nil {
				break
			}
			if needed[st.cut] {
				continue
			}
			if fails(st.c) {
				c, next = st.c, true
				break
			}
			needed[st.cut] = true
		}
		if !next {
			break
		}
	}
	return c
}

// reproduces runs try up to tries times and reports whether at least half of the tries fail (try returns
// true), with how many did: it stops as soon as that is decided either way.
func reproduces(tries int, try func() bool) (failed int, ok bool) {
	need := (tries + 1) / 2
	for ran := 0; ran < tries; ran++ {
		if try() {
			failed++
		}
		switch {
		case failed >= need:
			return failed, true
		case failed+(tries-ran-1) < need:
			return failed, false
		}
	}
	return failed, failed >= need
}

// ExploreResult is what the search did and found.
type ExploreResult struct {
	Seed     int64
	Runs     int
	Found    *ExploreCase
	Finding  outcome.Outcome
	Shrunk   *ExploreCase
	Repro    [2]int // the shrunk case failed in Repro[0] of Repro[1] runs
	File     string
	Known    []string // known issues met and skipped
	Problems []string // runs that broke (harness errors), skipped
}

// Explore runs random scenarios one after the other until a run finds etcd failing (a violation, members
// disagreeing, a crashed member), Count scenarios ran or For passed; then it shrinks what it found and
// writes the smallest scenario that still reproduces as Out/found.yaml. A finding attributed to a known
// upstream issue is reported and the search goes on. Each run's outcome is the judge's (the run's
// summary); the search's outcome is decided from them and comes back as the error, with its exit code.
func Explore(ctx context.Context, opts ExploreOptions, env Env) (*ExploreResult, error) {
	if env.Out == nil {
		env.Out = io.Discard
	}
	switch {
	case opts.Count <= 0 && opts.For <= 0:
		return nil, outcome.Usagef("give --count or --for: how long to search")
	case opts.MaxLoad < 20*time.Second:
		return nil, outcome.Usagef("--max-load %v: at least 20s", opts.MaxLoad)
	case opts.Tries < 1:
		return nil, outcome.Usagef("--tries %d: at least 1", opts.Tries)
	case opts.Workload != "" && !slices.Contains(exploreWorkloads, opts.Workload):
		return nil, outcome.Usagef("--workload %q: one of %s", opts.Workload, strings.Join(exploreWorkloads, ", "))
	}
	if opts.Seed == 0 {
		opts.Seed = newSeed()
	}
	if opts.Out == "" {
		opts.Out = filepath.Join("results", time.Now().Format("20060102-150405")+"-explore")
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return nil, outcome.Usagef("--out %s: %v", opts.Out, err)
	}
	res := &ExploreResult{Seed: opts.Seed}
	rnd := rand.New(rand.NewPCG(uint64(opts.Seed), 0x6578706c6f7265))
	fmt.Fprintf(env.Out, "chaosbench explore: seed %d, etcd %s%s, results in %s\n", opts.Seed, cmp.Or(opts.EtcdVersion, "builtin"), map[bool]string{true: " (failpoints)"}[opts.Failpoints], opts.Out)
	// run runs case c with seed into a directory of its own and returns the judge's outcome of it.
	run := func(c ExploreCase, seed int64) outcome.Outcome {
		res.Runs++
		dir := filepath.Join(opts.Out, fmt.Sprintf("run-%03d", res.Runs))
		sum, err := Run(ctx, c.Scenario(opts.EtcdVersion, opts.Failpoints, seed, dir), Env{Version: env.Version, Command: env.Command, Out: io.Discard})
		switch {
		case sum != nil:
			return sum.Verdict()
		case err != nil:
			return outcome.Decide(outcome.New(outcome.HarnessError, "%s: %v", dir, err))
		}
		return outcome.Decide(outcome.New(outcome.HarnessError, "%s: the run wrote no summary", dir))
	}
	began := time.Now()
	for n := 1; ctx.Err() == nil && (opts.Count <= 0 || n <= opts.Count) && (opts.For <= 0 || time.Since(began) < opts.For); n++ {
		c := randomCase(rnd, opts.Failpoints, opts.MaxLoad, opts.Workload)
		if _, err := planFaults(ptr(c.Scenario(opts.EtcdVersion, opts.Failpoints, 1, ""))); err != nil {
			n-- // a schedule the cluster cannot take: draw again
			continue
		}
		seed := rnd.Int64()
		o := run(c, seed)
		fmt.Fprintf(env.Out, "[%d] %s on %d members, %s, faults %s: %s\n", n, c.describeLoad(), c.Members, c.Duration, strings.Join(c.Faults, ","), o)
		switch {
		case o.Kind == outcome.KnownIssue:
			res.Known = append(res.Known, strings.Join(o.Texts(outcome.KnownIssue), "; "))
		case o.Kind == outcome.HarnessError || o.Kind == outcome.Undecided:
			res.Problems = append(res.Problems, fmt.Sprintf("run %d: %s", res.Runs, o))
		case o.Kind.Severe():
			res.Found, res.Finding = &c, o
		}
		if res.Found != nil {
			break
		}
	}
	if res.Found != nil && ctx.Err() == nil {
		fmt.Fprintf(env.Out, "found: %s\nshrinking (%d seeds a candidate)...\n", res.Finding, opts.Tries)
		shrunk := Shrink(ctx, *res.Found, func(d ExploreCase) bool {
			if _, err := planFaults(ptr(d.Scenario(opts.EtcdVersion, opts.Failpoints, 1, ""))); err != nil {
				return false
			}
			failed, ok := reproduces(opts.Tries, func() bool { return run(d, rnd.Int64()).Kind == res.Finding.Kind })
			if ok {
				fmt.Fprintf(env.Out, "  still fails (%d of its runs): %s on %d members, %s, %d clients, faults %s\n", failed, d.describeLoad(), d.Members, d.Duration, d.Clients, strings.Join(d.Faults, ","))
			}
			return ok
		})
		res.Shrunk = &shrunk
		for range opts.Tries {
			if run(shrunk, rnd.Int64()).Kind == res.Finding.Kind {
				res.Repro[0]++
			}
			res.Repro[1]++
		}
		res.File = filepath.Join(opts.Out, "found.yaml")
		if err := os.WriteFile(res.File, scenarioFile(shrunk, opts, res), 0o644); err != nil {
			return res, outcome.Decide(outcome.New(outcome.HarnessError, "write %s: %v", res.File, err)).ErrWith(err)
		}
		fmt.Fprintf(env.Out, "shrunk to %s (reproduced in %d of %d runs)\n", res.File, res.Repro[0], res.Repro[1])
	}
	o := res.Outcome(ctx)
	fmt.Fprintf(env.Out, "explore: %d runs; verdict: %s (exit code %d)\n", res.Runs, o, o.ExitCode())
	if err := writeExploreFile(opts.Out, res, o); err != nil {
		o = outcome.Decide(append(o.Reasons, outcome.New(outcome.HarnessError, "%v", err))...)
		return res, o.ErrWith(err)
	}
	return res, o.Err()
}

// ExploreFile, in the search's directory, records what it ran and found, and its outcome.
const ExploreFile = "explore.json"

// writeExploreFile writes explore.json: the seed, the runs, the finding and its shrunk scenario, the outcome.
func writeExploreFile(dir string, r *ExploreResult, o outcome.Outcome) error {
	doc := struct {
		Seed    int64            `json:"seed"`
		Runs    int              `json:"runs"`
		Found   *ExploreCase     `json:"found,omitempty"`
		Shrunk  *ExploreCase     `json:"shrunk,omitempty"`
		Repro   [2]int           `json:"reproduced,omitempty"`
		File    string           `json:"file,omitempty"`
		Outcome outcome.Kind     `json:"outcome"`
		Reasons []outcome.Reason `json:"reasons,omitempty"`
	}{r.Seed, r.Runs, r.Found, r.Shrunk, r.Repro, r.File, o.Kind, o.Reasons}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", ExploreFile, err)
	}
	if err := os.WriteFile(filepath.Join(dir, ExploreFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", ExploreFile, err)
	}
	return nil
}

// Outcome is the search's verdict: a finding is etcd failing (its kind, with where its scenario is); known
// issues met are named; runs that broke are harness errors (the search did not test what it drew); an
// interrupted search is incomplete.
func (r *ExploreResult) Outcome(ctx context.Context) outcome.Outcome {
	var reasons []outcome.Reason
	if r.Found != nil {
		text := strings.Join(r.Finding.Texts(r.Finding.Kind), "; ")
		if r.File != "" {
			text += fmt.Sprintf(" (shrunk to %s, reproduced in %d of %d runs)", r.File, r.Repro[0], r.Repro[1])
		}
		reasons = append(reasons, outcome.New(r.Finding.Kind, "%s", text))
	}
	for _, k := range r.Known {
		reasons = append(reasons, outcome.New(outcome.KnownIssue, "%s", k))
	}
	for _, p := range r.Problems {
		reasons = append(reasons, outcome.New(outcome.HarnessError, "%s", p))
	}
	if ctx.Err() != nil {
		reasons = append(reasons, outcome.New(outcome.Incomplete, "interrupted after %d runs", r.Runs))
	}
	return outcome.Decide(reasons...)
}

// scenarioFile renders the shrunk case as a scenario file ready for ci/chaos/regressions/.
func scenarioFile(c ExploreCase, opts ExploreOptions, r *ExploreResult) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "# Found by `chaosbench explore --seed %d` on etcd %s and shrunk: it failed in %d of %d runs.\n", r.Seed, cmp.Or(opts.EtcdVersion, "builtin"), r.Repro[0], r.Repro[1])
	for _, t := range r.Finding.Texts() {
		fmt.Fprintf(&b, "# finding: %s\n", strings.ReplaceAll(t, "\n", " "))
	}
	b.WriteString("# Say what went wrong and which etcd issue it is, then give it a name and a suite block.\n")
	b.WriteString("name: explore-found\n")
	if opts.EtcdVersion != "" {
		fmt.Fprintf(&b, "etcd-version: %s\n", opts.EtcdVersion)
	}
	if opts.Failpoints {
		b.WriteString("failpoints: true\n")
	}
	fmt.Fprintf(&b, "members: %d\nworkload: %s\nrate: %g\nclients: %d\nconns: %d\nduration: %s\nrequest-timeout: 2s\nkey-space-size: %d\n",
		c.Members, c.Workload, c.Rate, c.Clients, min(c.Clients, 4), c.Duration, c.KeySpace)
	if c.Workload == "watch-latency" {
		if c.WatchProgress > 0 {
			fmt.Fprintf(&b, "watch-streams: 8\nwatchers-per-stream: 1\nwatch-progress: %s\nprev-kv: true\n", c.WatchProgress)
		} else {
			b.WriteString("watch-streams: 2\nwatchers-per-stream: 4\nprev-kv: true\n")
		}
		if c.WatchReopen > 0 {
			fmt.Fprintf(&b, "watch-reopen: %s\nwatch-from: %s\n", c.WatchReopen, c.WatchFrom)
		}
	}
	if c.DeleteRatio > 0 {
		fmt.Fprintf(&b, "delete-ratio: %g\n", c.DeleteRatio)
	}
	if len(c.EtcdFlags) > 0 {
		b.WriteString("etcd-flag:\n")
		for _, f := range c.EtcdFlags {
			fmt.Fprintf(&b, "  - %s\n", f)
		}
	}
	if len(c.Faults) == 0 {
		b.WriteString("faults: [none]\n")
	} else {
		b.WriteString("faults:\n")
		for _, f := range c.Faults {
			fmt.Fprintf(&b, "  - %s\n", f)
		}
	}
	b.WriteString("fault-recovery-timeout: 30s\n")
	return []byte(b.String())
}

// describeLoad names the case's workload with what its watchers do: "watch-latency (re-opened from
// future, progress every 50ms)".
func (c ExploreCase) describeLoad() string {
	var parts []string
	if c.WatchReopen > 0 {
		parts = append(parts, "re-opened from "+c.WatchFrom)
	}
	if c.WatchProgress > 0 {
		parts = append(parts, fmt.Sprintf("progress every %s", c.WatchProgress))
	}
	if len(parts) == 0 {
		return c.Workload
	}
	return fmt.Sprintf("%s (%s)", c.Workload, strings.Join(parts, ", "))
}

func ptr[T any](v T) *T { return &v }
