package chaosbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/live"
	"github.com/etcd-chaosbench/chaosbench/results/report"
	"github.com/etcd-chaosbench/chaosbench/workloads/kube"
)

// QualificationFile is the qualification's machine-readable result inside its directory, QualificationSchema
// versions its layout (results/SCHEMA.md); QualificationReport is its Markdown rendering.
const (
	QualificationFile   = "qualification.json"
	QualificationReport = "qualification.md"
	QualificationPage   = "qualification.html"
	QualificationSchema = "chaosbench.qualification/v1"
)

// stepThresholds judge every step of the ladder besides the throughput: Kubernetes' API call SLOs on the
// etcd requests behind them, etcd's disk guidance from its own metrics, and no leader change.
var stepThresholds = []string{"k8s-slo", "etcd-hardware", "leader_changes<1"}

// QualifyOptions configures `chaosbench qualify`.
type QualifyOptions struct {
	// Scenario carries the cluster to qualify (backend, members, etcd flags, endpoints, TLS, member limits)
	// and the seed; qualify sets the workload, the duration, the thresholds and the output of each step.
	Scenario Scenario
	// Out is the qualification directory (default results/<time>-qualify); each step's run directory is
	// inside it.
	Out string
	// Class is the one class to qualify, or "auto" to climb small -> xlarge until one fails; with Profile,
	// a growth factor ("2x") or "auto" to climb the growth factors.
	Class string
	// Profile, when set, replaces the preset classes by a kube workload profile grown by each of Growth
	// (default DefaultGrowth) in turn; ScaleRates grows its request rates alone.
	Profile    string
	Growth     []float64
	ScaleRates bool
	// StepDuration is each step's measured load; Warmup precedes it and is excluded.
	StepDuration time.Duration
	Warmup       time.Duration
	// EarlyStop ends a step of the ladder once MinStep is measured and its verdict cannot change with 95%
	// confidence (earlyRule: every limit far from its measured interval); the step records why
	// (Step.EarlyStop) and is judged over the time it measured.
	EarlyStop bool
	MinStep   time.Duration
	// DataRoot puts the members' data of an embedded cluster on this directory's disk (the disk under
	// test), and is where the disk probe runs; default: the qualification directory's disk.
	DataRoot string
	// DiskProbe runs the disk probe first; DiskSize is what each of its patterns writes.
	DiskProbe bool
	DiskSize  int64
	// DiskResults are `chaosbench qualify disk --json` results from the member hosts of an external
	// cluster, attached and judged instead of a probe from here.
	DiskResults []string
	// EtcdctlCompat runs `etcdctl check perf`'s put-only loads, judged by its rule, instead of the ladder,
	// so that a user can lay our verdict beside the one they know; CompatLoad is the load (s, m, l, xl) or
	// "auto" to climb from s until one fails.
	EtcdctlCompat bool
	CompatLoad    string
	// WithFaults runs the highest passing class again under a leader kill and a leader partition; the
	// qualification holds only if writes resume within twice the election timeout and the checks stay clean.
	WithFaults bool
	// CompatDuration is the length of each compat load (check perf: 60 s).
	CompatDuration time.Duration
	// Log receives what the qualification says as it goes, each step's progress (Progress: auto for
	// bars when Log is a terminal and a line every 15 s otherwise, bars, lines or none), the verdict and
	// the table.
	Log      io.Writer
	Progress string
	// Env is passed to every step's Run (its Out is replaced by the step's run.log).
	Env Env
}

// DefaultQualifyOptions returns the options of a plain `chaosbench qualify`.
func DefaultQualifyOptions() QualifyOptions {
	s := DefaultScenario()
	return QualifyOptions{
		Scenario: s, Class: "auto", StepDuration: 3 * time.Minute, Warmup: 30 * time.Second, EarlyStop: true, MinStep: 30 * time.Second,
		DiskProbe: true, CompatDuration: 60 * time.Second, CompatLoad: "auto", Progress: live.ProgressAuto,
	}
}

func (o *QualifyOptions) validate() error {
	if err := o.validateGrowth(); err != nil {
		return err
	}
	if o.Class != "auto" && !o.isLadderClass(o.Class) {
		if s := outcome.Suggest(o.Class, append([]string{"auto"}, Classes...)); s != "" {
			return outcome.Usagef("--class %q: auto or %s (did you mean %s?)", o.Class, strings.Join(Classes, ", "), s)
		}
		return outcome.Usagef("--class %q: auto or %s", o.Class, strings.Join(Classes, ", "))
	}
	if o.Progress == "" {
		o.Progress = live.ProgressAuto
	}
	if !slices.Contains([]string{live.ProgressAuto, live.ProgressBars, live.ProgressLines, live.ProgressNone}, o.Progress) {
		return outcome.Usagef("--progress %q: auto, bars, lines or none", o.Progress)
	}
	if len(o.DiskResults) > 0 && o.Scenario.Cluster != "external" {
		return outcome.Usagef("--disk-result is for --cluster external: the disks of embed and docker members are probed from here")
	}
	for _, f := range o.DiskResults {
		if _, err := readDiskResult(f); err != nil {
			return err
		}
	}
	if o.StepDuration <= 0 {
		return outcome.Usagef("--step-duration %s: must be positive", o.StepDuration)
	}
	if o.Warmup < 0 {
		return outcome.Usagef("--warmup %s: must not be negative", o.Warmup)
	}
	if o.MinStep < 0 {
		return outcome.Usagef("--min-step %s: must not be negative", o.MinStep)
	}
	if o.DataRoot != "" {
		if o.Scenario.Cluster != "embed" {
			return outcome.Usagef("--data-root is for --cluster embed (docker members keep their data in their containers; an external cluster's disk is probed with `chaosbench qualify disk` on its hosts)")
		}
		if st, err := os.Stat(o.DataRoot); err != nil || !st.IsDir() {
			return outcome.Usagef("--data-root %q: not a directory", o.DataRoot)
		}
	}
	if o.Out != "" {
		if _, err := os.Stat(filepath.Join(o.Out, QualificationFile)); err == nil {
			return outcome.Usagef("--out %s: already holds a qualification; choose another directory", o.Out)
		}
	}
	if o.CompatDuration <= 0 {
		return outcome.Usagef("--compat-duration %s: must be positive", o.CompatDuration)
	}
	if o.WithFaults && (o.Scenario.Cluster == "external" || o.Scenario.Members < 3 || o.StepDuration+o.Warmup < 30*time.Second) {
		return outcome.Usagef("--with-faults needs a cluster chaosbench starts, of 3 or more members, and --step-duration plus --warmup of at least 30s")
	}
	if o.EtcdctlCompat {
		if o.WithFaults {
			return outcome.Usagef("--with-faults is for the kube ladder, not --etcdctl-compat")
		}
		if o.Class != "auto" {
			return outcome.Usagef("--class is for the kube ladder; --etcdctl-compat takes --compat-load")
		}
		if _, err := o.compatLoads(); err != nil {
			return err
		}
		s := o.compatScenario(CompatLoads[0], "", 0)
		return s.validate()
	}
	// Every step's scenario must be valid before anything starts.
	for _, c := range o.classes() {
		s := o.stepScenario(c, "", 0)
		if err := s.validate(); err != nil {
			return err
		}
		if _, _, err := s.newWorkload(); err != nil {
			return err
		}
	}
	return nil
}

// classes are the classes the ladder climbs.
func (o *QualifyOptions) classes() []string {
	if o.Class == "auto" && o.Profile != "" {
		return o.growthClasses()
	}
	if o.Class == "auto" {
		return Classes
	}
	return []string{o.Class}
}

// stepScenario is the scenario of the ladder's step at class: the kube workload at the class's preset, open
// loop, no faults, judged by stepThresholds.
func (o *QualifyOptions) stepScenario(class, dir string, seed int64) Scenario {
	s := o.Scenario
	s.Name = "qualify-" + class
	s.Out = dir
	s.Seed = seed
	s.Workload = "kube"
	s.Kube = kube.Options{Preset: class}
	if f, ok := growthFactor(class); ok && o.Profile != "" {
		s.Kube = kube.Options{}
		s.Profile, s.Scale, s.ScaleRates = o.Profile, f, o.ScaleRates
	}
	s.Duration = o.StepDuration + o.Warmup
	s.Warmup = o.Warmup
	s.Thresholds = append(slices.Clone(o.Scenario.Thresholds), stepThresholds...)
	s.Faults.Schedule = []string{"none"}
	s.Progress = o.Progress
	return s
}

// nodes is the node count of a step: its preset's, or its profile's at its growth factor.
func (o *QualifyOptions) nodes(class string) int {
	s := o.stepScenario(class, "", 0)
	opts, err := s.kubeOptions()
	if err != nil {
		return 0
	}
	cfg, err := opts.Resolve(s.Duration)
	if err != nil {
		return 0
	}
	return cfg.Nodes
}

// classNodes is the node count of a class's preset.
func classNodes(class string) int {
	cfg, err := kube.Options{Preset: class}.Resolve(time.Minute)
	if err != nil {
		return 0
	}
	return cfg.Nodes
}

// Qualify judges the hardware under a cluster: the disk probe (on the data root), then the load ladder of
// size classes, each step a run of its own in the qualification directory, stopping at the first class
// that does not pass. It writes qualification.json and qualification.md, prints the verdict first, and
// returns an error carrying the outcome (nil for a pass). The outcome is decided once, from every step's
// run summary (see decide): a violation or a crashed member in any step is exit 4, the class asked for
// (with auto: small) not qualifying, a network too slow or a class that does not hold under faults exit 3,
// anything undecided exit 1.
func Qualify(ctx context.Context, o QualifyOptions) (*Qualification, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	if err := o.validate(); err != nil {
		return nil, err
	}
	if o.Scenario.Seed == 0 {
		o.Scenario.Seed = newSeed()
	}
	if o.Scenario.Cluster == "external" {
		// An endpoint that does not answer, or refuses --user, is bad input: one line, before the
		// qualification's directory or its plan, not at its first step.
		c, err := o.Scenario.connectExternal(ctx)
		if err != nil {
			return nil, err
		}
		c.Close(ctx)
	}
	q, dir, err := o.begin()
	if err != nil {
		return nil, err
	}
	if err := o.probeDisks(ctx, dir, q); err != nil {
		return nil, err
	}
	stepErr := o.climbLadder(ctx, dir, q)
	if outcome.IsUsage(stepErr) {
		// Found by Run before it started anything (an etcd build that cannot run in a container, ...).
		return nil, stepErr
	}
	if o.WithFaults && stepErr == nil && ctx.Err() == nil && len(q.Steps) > 0 {
		err := o.qualifyUnderFaults(ctx, dir, q)
		if outcome.IsUsage(err) {
			return nil, err
		}
		if err != nil {
			stepErr = err
		}
	}
	if o.EtcdctlCompat {
		compat, err := o.runCompat(ctx, dir, q.Seed)
		if outcome.IsUsage(err) {
			return nil, err
		}
		if err != nil {
			stepErr = err
		}
		q.Compat = compat
	}
	q.Interrupted = ctx.Err() != nil
	if stepErr != nil {
		q.StoppedBy = stepErr.Error()
	}
	q.decide()
	if q.Network != nil {
		fmt.Fprintf(o.Log, "network: %s\n", q.Network.Verdict)
	}
	q.End = time.Now()
	q.finish(dir, o.Log)
	err = q.Outcome.ErrWith(stepErr)
	if ctx.Err() != nil && err != nil {
		err = fmt.Errorf("%w: %w", ErrInterrupted, err)
	}
	return q, err
}

// begin creates the qualification's directory and its record, and says what it is about to qualify.
func (o *QualifyOptions) begin() (*Qualification, string, error) {
	start := time.Now()
	dir := o.Out
	if dir == "" {
		dir = filepath.Join("results", start.Format("20060102-150405")+"-qualify")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", outcome.Usagef("--out %s: %v", dir, err)
	}
	q := &Qualification{
		Schema: QualificationSchema, Requested: o.Class, Seed: o.Scenario.Seed, Start: start, Profile: o.Profile,
		// Members, versions and the machine are what the steps observe (decide), never the flags' defaults.
		Cluster: QualifiedCluster{
			Backend: o.Scenario.Cluster, EtcdFlags: o.Scenario.EtcdFlags,
			Endpoints: o.Scenario.Endpoints, MemberCPUs: o.Scenario.MemberCPUs, MemberMemory: o.Scenario.MemberMemory,
			DataRoot: o.DataRoot,
		},
		StepSeconds: o.StepDuration.Seconds(), WarmupSeconds: o.Warmup.Seconds(),
	}
	if o.Profile != "" {
		q.Ladder = o.growthClasses()
	}
	if o.EtcdctlCompat {
		q.CompatLoad = o.CompatLoad
		fmt.Fprintf(o.Log, "chaosbench qualify --etcdctl-compat: %s cluster, etcdctl check perf's loads, %s each, seed %d\nresults: %s\n",
			o.Scenario.clusterDescription(), o.CompatDuration, q.Seed, dir)
	} else {
		fmt.Fprintf(o.Log, "chaosbench qualify: %s cluster, classes %s, %s per step after %s warm-up, seed %d\nresults: %s\n",
			o.Scenario.clusterDescription(), strings.Join(o.classes(), " -> "), o.StepDuration, o.Warmup, q.Seed, dir)
	}
	return q, dir, nil
}

// climbLadder runs the ladder's steps, smallest class first, until one does not pass (the etcdctl-compat
// loads replace the ladder). It returns why a step could not run: a usage error, which stops the
// qualification, or a harness error, which leaves it undecided.
func (o *QualifyOptions) climbLadder(ctx context.Context, dir string, q *Qualification) error {
	for i, class := range o.classes() {
		if ctx.Err() != nil || o.EtcdctlCompat {
			break
		}
		st, err := o.runStep(ctx, dir, class, q.Seed+int64(i), q.Disk)
		if err != nil {
			return err
		}
		q.Steps = append(q.Steps, *st)
		fmt.Fprintf(o.Log, "step %s (%d nodes): %s\n", class, st.Nodes, st.line())
		if st.Verdict != StepPass {
			break
		}
	}
	return nil
}

// qualifyUnderFaults runs the highest class that passed again under faults. Without a class that passed,
// there is nothing to hold under faults.
func (o *QualifyOptions) qualifyUnderFaults(ctx context.Context, dir string, q *Qualification) error {
	last := q.Steps[len(q.Steps)-1]
	if last.Verdict != StepPass && len(q.Steps) == 1 {
		return nil
	}
	class := last.Class
	if last.Verdict != StepPass {
		class = q.Steps[len(q.Steps)-2].Class
	}
	f, err := o.runFaultStep(ctx, dir, class, q.Seed+int64(len(Classes)))
	if outcome.IsUsage(err) {
		return err
	}
	q.Faults = f
	if f != nil {
		fmt.Fprintf(o.Log, "faults: %s\n", f.text())
	}
	return err
}

// finish marks every step's report with the qualification's verdict and writes the qualification (not
// doing either is a harness error of the qualification, decided with the rest), then prints the verdict,
// the table and the outcome with its reasons.
func (q *Qualification) finish(dir string, log io.Writer) {
	if err := q.bannerSteps(dir); err != nil {
		fmt.Fprintln(log, "error:", err)
		q.written = append(q.written, outcome.New(outcome.HarnessError, "%v", err))
		q.decide()
	}
	if err := q.write(dir); err != nil {
		fmt.Fprintln(log, "error:", err)
		q.written = append(q.written, outcome.New(outcome.HarnessError, "%v", err))
		q.decide()
	}
	fmt.Fprintln(log)
	fmt.Fprintln(log, q.Verdict)
	q.writeTable(log)
	fmt.Fprintf(log, "qualification written to %s\n", filepath.Join(dir, QualificationFile))
	fmt.Fprintf(log, "verdict: %s (%s, exit code %d)\n", q.Outcome.Headline(), q.Outcome.Kind, q.ExitCode)
	for _, r := range q.Outcome.Reasons {
		fmt.Fprintf(log, "  %s: %s\n", r.Kind, r.Text)
	}
}

// bannerSteps puts the qualification's verdict at the top of every step's report.html and report.md, with
// a link back to qualification.md: a step's own run outcome says whether that run went well, not what the
// hardware qualified for.
func (q *Qualification) bannerSteps(dir string) error {
	var dirs []string
	for _, st := range q.Steps {
		dirs = append(dirs, st.Dir)
	}
	for _, c := range q.Compat {
		dirs = append(dirs, c.Dir)
	}
	if q.Faults != nil {
		dirs = append(dirs, q.Faults.Dir)
	}
	class := q.Outcome.Class()
	var errs []error
	for _, d := range dirs {
		if d == "" {
			continue
		}
		stepDir := filepath.Join(dir, d)
		if _, err := os.Stat(filepath.Join(stepDir, results.SummaryFile)); err != nil {
			continue // a step that left no run behind has no report to mark
		}
		// Step directories sit directly in the qualification's.
		errs = append(errs, report.SetBanner(stepDir, report.Banner{Title: "qualification", Text: q.Verdict, Class: class,
			Link: "../" + QualificationPage, MarkdownLink: "../" + QualificationReport}))
	}
	return errors.Join(errs...)
}

// runStep runs the ladder's step at class in its own run directory and judges it.
func (o *QualifyOptions) runStep(ctx context.Context, dir, class string, seed int64, disk *DiskQualification) (*Step, error) {
	stepDir := filepath.Join(dir, "step-"+class)
	if err := os.MkdirAll(stepDir, 0o755); err != nil {
		return nil, fmt.Errorf("step %s: %w", class, err)
	}
	if o.DataRoot != "" {
		// The members' data goes on the disk under test: their directory is a link to one on the data root.
		data, err := os.MkdirTemp(o.DataRoot, "chaosbench-qualify-"+class+"-")
		if err != nil {
			return nil, fmt.Errorf("step %s: --data-root: %w", class, err)
		}
		defer os.RemoveAll(data)
		if err := os.Symlink(data, filepath.Join(stepDir, "members")); err != nil {
			return nil, fmt.Errorf("step %s: %w", class, err)
		}
	}
	log, err := os.Create(filepath.Join(stepDir, "run.log"))
	if err != nil {
		return nil, fmt.Errorf("step %s: %w", class, err)
	}
	defer log.Close()
	fmt.Fprintf(o.Log, "step %s (%d nodes): %s of kube load (plus %s warm-up), log %s\n", class, o.nodes(class), o.StepDuration, o.Warmup, log.Name())
	env := o.stepEnv(log, fmt.Sprintf("step %d/%d %s", slices.Index(o.classes(), class)+1, len(o.classes()), class))
	var clientRTT []ClientRTT
	env.ClusterReady = func(ctx context.Context, c clusters.Cluster) { clientRTT = measureClientRTT(ctx, c) }
	s := o.stepScenario(class, stepDir, seed)
	var early *EarlyStop
	if o.EarlyStop && o.MinStep < o.StepDuration {
		var planned float64
		if cfg, err := s.Kube.Resolve(s.Duration); err == nil {
			planned = kube.PlanTotal(cfg.Plan(s.endpointCount()))
		}
		rule := newEarlyRule(planned, o.StepDuration, o.MinStep)
		env.EndLoadEvery = earlyEvery
		env.EndLoad = func(v LoadView) (bool, string) {
			stop, expected, why := rule.decide(v)
			if stop {
				early = &EarlyStop{AtSeconds: v.Measured.Seconds(), Expected: expected, Why: why}
			}
			return stop, why
		}
	}
	sum, runErr := Run(ctx, s, env)
	if sum == nil {
		// Nothing ran: a usage error (validated before, so unexpected here) or a harness failure.
		if outcome.IsUsage(runErr) {
			return nil, runErr
		}
		if runErr == nil {
			runErr = errors.New("the run returned no summary")
		}
		return stepNotRun(class, fmt.Sprintf("the step did not run: %v", runErr)), nil
	}
	st := judgeStep(class, sum, disk)
	st.Dir = "step-" + class
	if sum.EndedEarly != "" {
		st.EarlyStop = early
	}
	st.ClientRTT = clientRTT
	return st, nil
}

// progressInterval is how often a step's progress line is printed when Log is not a terminal.
const progressInterval = 15 * time.Second

// stepEnv is the Env of a step's Run: its output goes to the step's run.log, its progress to the
// qualification's log, labelled.
func (o *QualifyOptions) stepEnv(log io.Writer, label string) Env {
	env := o.Env
	env.Out = log
	env.Progress, env.ProgressLabel, env.ProgressEvery = o.Log, label, progressInterval
	return env
}
