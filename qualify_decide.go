package chaosbench

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// decide decides the qualification from its steps. Its outcome is outcome.Combine of every part: each step
// of the ladder (or each etcdctl-compat load), the --with-faults step, and the network judgement, plus the
// qualification's own reasons (interrupted, stopped, the class asked for not run). So a violation or a
// crashed member in any step of any class is the qualification's outcome (exit 4), whatever class was asked
// for and whatever passed before it. One thing of a step is not a failure of the qualification: with auto,
// a class above small that fails its thresholds is where the ladder stops, the answer to "how far", so its
// failed thresholds are left out of its part (its violations, crashes and undecided checks are not). The
// answer (the largest class that qualified, and why not the next) is kept in words; the verdict line is the
// outcome's headline and kind followed by that answer, and names the outcome's first reason when the answer
// does not already say it.
func (q *Qualification) decide() {
	q.observe()
	q.Network = nil
	if len(q.Steps) > 0 {
		// The ladder's steps measure the peers; etcdctl-compat loads do not.
		q.Network = judgeNetwork(q.Steps, q.Cluster.EtcdFlags, q.Cluster.Members)
	}
	parts := q.parts()
	q.Outcome = outcome.Combine(parts, append(q.ownReasons(), q.written...)...)
	q.ExitCode = q.Outcome.ExitCode()
	if q.CompatLoad != "" {
		q.answer = q.compatAnswer()
	} else {
		q.answer = q.ladderAnswer()
	}
	q.Verdict = verdictLine(q.Outcome, q.answer, parts)
}

// parts are the qualification's parts, each with its outcome, labelled as its reasons are shown.
func (q *Qualification) parts() []outcome.Part {
	var parts []outcome.Part
	for i, st := range q.Steps {
		o := st.Outcome
		if i > 0 && q.Requested == "auto" {
			o = beyondAsked(o)
		}
		parts = append(parts, outcome.Part{Label: "step " + st.Class, Outcome: o})
	}
	if f := q.Faults; f != nil {
		parts = append(parts, outcome.Part{Label: "faults at " + f.Class, Outcome: f.Outcome})
	}
	for i, c := range q.Compat {
		o := c.Outcome
		if i > 0 && q.CompatLoad == "auto" {
			o = beyondAsked(o)
		}
		parts = append(parts, outcome.Part{Label: "etcdctl-compat " + c.Load, Outcome: o})
	}
	if n := q.Network; n != nil {
		parts = append(parts, outcome.Part{Label: "network", Outcome: n.outcome()})
	}
	return parts
}

// beyondAsked is the part of a step above the class (or load) asked for: its failed thresholds are where
// the ladder stopped, not a failure; everything else it found stays.
func beyondAsked(o outcome.Outcome) outcome.Outcome {
	if len(o.Reasons) == 0 && o.Kind != outcome.ThresholdFailed {
		return o
	}
	var rs []outcome.Reason
	for _, r := range o.Reasons {
		if r.Kind != outcome.ThresholdFailed {
			rs = append(rs, r)
		}
	}
	return outcome.Decide(rs...)
}

// outcome is the network judgement as a part of the qualification: a network too slow for the cluster's
// timeouts fails a threshold; one whose peer round trips were not observed could not be judged.
func (n *Network) outcome() outcome.Outcome {
	switch {
	case n.Pass:
		return outcome.Outcome{Kind: outcome.OK}
	case n.Peers == nil:
		return outcome.Decide(outcome.New(outcome.Undecided, "not judged: %s", n.Verdict))
	}
	return outcome.Decide(outcome.New(outcome.ThresholdFailed, "%s", n.Verdict))
}

// ownReasons are the qualification's reasons that no step recorded.
func (q *Qualification) ownReasons() []outcome.Reason {
	var rs []outcome.Reason
	if q.Interrupted {
		rs = append(rs, outcome.New(outcome.Incomplete, "interrupted"))
	}
	if q.StoppedBy != "" {
		rs = append(rs, outcome.New(outcome.HarnessError, "%s", q.StoppedBy))
	}
	if len(rs) > 0 {
		return rs // what was not run, was not run because of them
	}
	if q.CompatLoad != "" {
		target := q.compatTarget()
		if !slices.ContainsFunc(q.Compat, func(c CompatStep) bool { return c.Load == target }) {
			rs = append(rs, outcome.New(outcome.Undecided, "load %s was not run", target))
		}
		return rs
	}
	target := q.target()
	if !slices.ContainsFunc(q.Steps, func(st Step) bool { return st.Class == target }) {
		rs = append(rs, outcome.New(outcome.Undecided, "class %s was not run", target))
	}
	return rs
}

// target is the class that must qualify for the qualification to pass: the one asked for, with auto the
// smallest.
func (q *Qualification) target() string {
	if q.Requested == "auto" || q.Requested == "" {
		return q.ladder()[0]
	}
	return q.Requested
}

// compatTarget is the etcdctl-compat load that must pass: the one asked for, with auto the smallest.
func (q *Qualification) compatTarget() string {
	if q.CompatLoad == "auto" {
		return CompatLoads[0].Name
	}
	return q.CompatLoad
}

// verdictLine is the verdict in one line: the outcome's headline and kind, the answer, and the outcome's
// first reason when the answer does not say it already (a network too slow, a known issue, an interrupt).
func verdictLine(o outcome.Outcome, answer string, parts []outcome.Part) string {
	line := fmt.Sprintf("%s (%s): %s", o.Headline(), o.Kind, answer)
	if len(o.Reasons) == 0 {
		return line
	}
	first := o.Reasons[0].Text
	text := first
	for _, p := range parts {
		if t, ok := strings.CutPrefix(first, p.Label+": "); ok {
			text = t
			break
		}
	}
	if !strings.Contains(answer, text) {
		line += "; " + first
	}
	return line
}

// ladderAnswer says what the hardware qualified for, and why not the next class, and sets Qualified.
func (q *Qualification) ladderAnswer() string {
	var passed []Step
	var stop *Step
	for i := range q.Steps {
		if q.Steps[i].Verdict == StepPass {
			passed = append(passed, q.Steps[i])
			continue
		}
		stop = &q.Steps[i]
		break
	}
	var head string
	q.Qualified = ""
	if len(passed) > 0 {
		last := passed[len(passed)-1]
		q.Qualified = last.Class
		head = fmt.Sprintf("qualified for %s (%d nodes)", last.Class, last.Nodes)
		if q.Profile != "" {
			head = fmt.Sprintf("qualified for %s this cluster's traffic (%d nodes)", last.Class, last.Nodes)
		}
		if ladder := q.ladder(); q.Requested == "auto" && last.Class == ladder[len(ladder)-1] {
			head += ", the largest class"
		}
	}
	join := func(more string) {
		if head == "" {
			head = more
		} else {
			head += "; " + more
		}
	}
	switch {
	case stop != nil && stop.Verdict == StepFail && len(stop.Reasons) > 0:
		why := stop.Reasons[0]
		if len(stop.Reasons) > 1 {
			why += fmt.Sprintf(" (and %d more)", len(stop.Reasons)-1)
		}
		tail := fmt.Sprintf("%s at the %d-node load (%s", why, stop.Nodes, stop.Resource)
		if stop.Context != "" {
			tail += ": " + stop.Context
		}
		tail += ")"
		if head == "" {
			head = fmt.Sprintf("not qualified for %s (%d nodes): %s", stop.Class, stop.Nodes, tail)
		} else {
			head += fmt.Sprintf("; not %s: %s", stop.Class, tail)
		}
	case stop != nil:
		join(fmt.Sprintf("%s undecided (%s): %s", stop.Class, stop.Resource, strings.Join(stop.Reasons, "; ")))
	case q.Interrupted || q.StoppedBy != "":
		if head == "" {
			head = "not decided"
		}
		if q.StoppedBy != "" {
			head += "; stopped: " + q.StoppedBy
		} else {
			head += "; interrupted"
		}
	}
	if head == "" {
		head = "not decided: no class was run"
	}
	if q.Faults != nil {
		head += "; " + q.Faults.text()
	}
	return head
}

// compatAnswer is the etcdctl-compat loads' result by check perf's rule.
func (q *Qualification) compatAnswer() string {
	var parts []string
	for _, c := range q.Compat {
		v := fmt.Sprintf("load %s (%g writes/s, %d clients) PASS: %.0f writes/s, slowest %.1f ms, stddev %.1f ms", c.Load, c.Target, c.Clients, c.Throughput, c.SlowestMs, c.StdDevMs)
		if !c.Pass {
			v = fmt.Sprintf("load %s (%g writes/s, %d clients) FAIL: %s", c.Load, c.Target, c.Clients, strings.Join(c.Failures, "; "))
		}
		parts = append(parts, v)
	}
	if len(parts) == 0 {
		parts = append(parts, "no load was run")
	}
	answer := "etcdctl check perf's rule: " + strings.Join(parts, "; ")
	if q.StoppedBy != "" {
		answer += "; stopped: " + q.StoppedBy
	}
	return answer
}

// observe fills in the cluster as the steps' runs saw it: the most members any step found, the versions
// the cluster reported, the machine, and (for a qualification decided from its directory alone) the etcd
// settings the members were started with.
func (q *Qualification) observe() {
	var seen []Observed
	for _, st := range q.Steps {
		seen = append(seen, st.Observed)
	}
	if q.Faults != nil {
		seen = append(seen, q.Faults.Observed)
	}
	for _, c := range q.Compat {
		seen = append(seen, c.Observed)
	}
	var versions []string
	for _, o := range seen {
		q.Cluster.Members = max(q.Cluster.Members, o.Members)
		v := o.EtcdServer
		if len(o.EtcdVersions) > 0 {
			v = strings.TrimSpace(v + " (members: " + strings.Join(o.EtcdVersions, ", ") + ")")
		}
		if v != "" && !slices.Contains(versions, v) {
			versions = append(versions, v)
		}
		if q.Cluster.Machine == "" {
			q.Cluster.Machine = o.Machine
		}
		if len(q.Cluster.EtcdFlags) == 0 {
			q.Cluster.EtcdFlags = o.EtcdFlags
		}
		if q.Cluster.Backend == "" {
			q.Cluster.Backend = o.Backend
		}
	}
	if len(versions) > 0 {
		q.Cluster.EtcdVersion = strings.Join(versions, "; ")
	}
}

// stepNotRun is a ladder step whose run left no summary: nothing of the hardware was measured, a harness
// error.
func stepNotRun(class, why string) *Step {
	return &Step{Class: class, Nodes: stepNodes(class, nil), Dir: "step-" + class, Verdict: StepUndecided, Resource: "harness",
		Reasons: []string{why}, Outcome: outcome.Decide(outcome.New(outcome.HarnessError, "%s", why))}
}

// DecideQualificationDir decides a qualification again from its directory alone, as Qualify decides it at
// its end: every step's run directory (step-CLASS, faults-CLASS, compat-LOAD) is judged from its
// summary.json, and the qualification's outcome combined from them. A step directory without a summary is a
// step that did not run (a harness error). qualification.json, when dir has one, says what was asked (the
// class, the etcdctl-compat load), the disk probe, the client round trips and whether the qualification
// was interrupted or stopped; requested, when not "", is the class asked for ("auto" or a class; the
// default without qualification.json is auto). It starts nothing and writes nothing: the job x outcome
// tests drive qualify's decision through it from recorded runs.
func DecideQualificationDir(dir, requested string) (*Qualification, error) {
	q := &Qualification{Schema: QualificationSchema, Requested: "auto"}
	recorded := map[string]Step{}
	if b, err := os.ReadFile(filepath.Join(dir, QualificationFile)); err == nil {
		if err := json.Unmarshal(b, q); err != nil {
			return nil, fmt.Errorf("read %s: %w", filepath.Join(dir, QualificationFile), err)
		}
		for _, st := range q.Steps {
			recorded[st.Class] = st
		}
		q.Steps, q.Faults, q.Compat, q.Network, q.Outcome = nil, nil, nil, nil, outcome.Outcome{}
		q.Cluster.Members, q.Cluster.EtcdVersion, q.Cluster.Machine = 0, "", ""
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("read %s: %w", QualificationFile, err)
	}
	if requested != "" {
		q.Requested = requested
	}
	if _, growth := growthFactor(q.Requested); q.Requested != "auto" && !slices.Contains(q.ladder(), q.Requested) && !growth {
		return nil, outcome.Usagef("class %q: auto or %s", q.Requested, strings.Join(Classes, ", "))
	}
	if q.CompatLoad != "" {
		if err := q.readCompat(dir); err != nil {
			return nil, err
		}
	} else if err := q.readLadder(dir, recorded); err != nil {
		return nil, err
	}
	q.decide()
	return q, nil
}

// readLadder judges the ladder's step directories in dir, smallest class first, and the fault step's.
func (q *Qualification) readLadder(dir string, recorded map[string]Step) error {
	classes := q.ladder()
	if q.Requested != "auto" {
		classes = []string{q.Requested}
	}
	for _, class := range classes {
		s, ok, err := readStepSummary(dir, "step-"+class)
		switch {
		case err != nil:
			return err
		case !ok:
			continue
		case s == nil:
			why := "the step did not run: it left no " + results.SummaryFile
			if r, ok := recorded[class]; ok && len(r.Reasons) > 0 {
				why = r.Reasons[0]
			}
			q.Steps = append(q.Steps, *stepNotRun(class, why))
			continue
		}
		st := judgeStep(class, s, q.Disk)
		st.Dir, st.ClientRTT = "step-"+class, recorded[class].ClientRTT
		q.Steps = append(q.Steps, *st)
	}
	for _, class := range q.ladder() {
		s, ok, err := readStepSummary(dir, "faults-"+class)
		if err != nil || !ok {
			if err != nil {
				return err
			}
			continue
		}
		if s == nil {
			q.Faults = &FaultStep{Class: class, Dir: "faults-" + class, Verdict: StepUndecided, Reasons: []string{"the step did not run"},
				Outcome: outcome.Decide(outcome.New(outcome.HarnessError, "the step did not run: it left no %s", results.SummaryFile))}
			continue
		}
		q.Faults = judgeFaultStep(class, s, 2*etcdFlagMs(s.Cluster.EtcdFlags, "election-timeout", 1000))
		q.Faults.Dir = "faults-" + class
	}
	return nil
}

// readCompat judges the etcdctl-compat loads' directories in dir, smallest load first.
func (q *Qualification) readCompat(dir string) error {
	if q.CompatLoad != "auto" && !slices.ContainsFunc(CompatLoads, func(l CompatLoad) bool { return l.Name == q.CompatLoad }) {
		return outcome.Usagef("compat load %q: auto, s, m, l or xl", q.CompatLoad)
	}
	for _, l := range CompatLoads {
		if q.CompatLoad != "auto" && l.Name != q.CompatLoad {
			continue
		}
		name := "compat-" + l.Name
		s, ok, err := readStepSummary(dir, name)
		switch {
		case err != nil:
			return err
		case !ok:
			continue
		case s == nil:
			q.StoppedBy = fmt.Sprintf("etcdctl-compat %s: the load did not run: it left no %s", l.Name, results.SummaryFile)
			continue
		}
		c := judgeCompat(l, s, filepath.Join(dir, name))
		c.Dir = name
		q.Compat = append(q.Compat, c)
	}
	return nil
}

// readStepSummary reads the summary of the step directory name in dir: ok is false when there is no such
// directory, and the summary nil when the directory holds none (the step did not run).
func readStepSummary(dir, name string) (*results.Summary, bool, error) {
	if st, err := os.Stat(filepath.Join(dir, name)); err != nil || !st.IsDir() {
		return nil, false, nil
	}
	if _, err := os.Stat(filepath.Join(dir, name, results.SummaryFile)); errors.Is(err, fs.ErrNotExist) {
		return nil, true, nil
	}
	s, err := results.ReadSummary(filepath.Join(dir, name))
	if err != nil {
		return nil, true, fmt.Errorf("step %s: %w", name, err)
	}
	return s, true, nil
}

// RedecideQualification decides the qualification in dir again from its directory alone
// (DecideQualificationDir), then writes it as Qualify does at its end: qualification.json, .md and .html,
// the banner of every step's report, the verdict line and the table on log. It returns the error carrying
// the outcome that Qualify returns (ExitCode maps it to the exit code).
func RedecideQualification(dir, requested string, log io.Writer) (*Qualification, error) {
	if log == nil {
		log = io.Discard
	}
	q, err := DecideQualificationDir(dir, requested)
	if err != nil {
		return nil, err
	}
	q.finish(dir, log)
	return q, q.Outcome.Err()
}
