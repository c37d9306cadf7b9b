package chaosbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// FaultStep is the --with-faults step: the highest passing class again, with a leader kill at a third of
// the load and a leader partition at two thirds. The class holds under faults when every fault happened,
// writes resumed within twice the election timeout after each, the cluster recovered, and every check
// stayed clean.
type FaultStep struct {
	Class   string   `json:"class"`
	Dir     string   `json:"dir"`
	Verdict string   `json:"verdict"`
	Reasons []string `json:"reasons,omitempty"`
	// LimitMs is the longest write gap allowed: twice the election timeout.
	LimitMs float64 `json:"write_gap_limit_ms"`
	// Windows are the faults with their write gaps.
	Windows []FaultGap `json:"windows"`
	// Outcome is the step's outcome: its run's (results.Decide) with the write gaps judged (see
	// judgeFaultStep).
	Outcome outcome.Outcome `json:"outcome"`
	Observed
}

// FaultGap is one fault and what it did to writes.
type FaultGap struct {
	Fault      string  `json:"fault"`
	WriteGapMs float64 `json:"write_gap_ms"`
	Recovered  bool    `json:"recovered"`
}

// runFaultStep runs the fault step at class.
func (o *QualifyOptions) runFaultStep(ctx context.Context, dir, class string, seed int64) (*FaultStep, error) {
	stepDir := filepath.Join(dir, "faults-"+class)
	if err := os.MkdirAll(stepDir, 0o755); err != nil {
		return nil, err
	}
	if o.DataRoot != "" {
		data, err := os.MkdirTemp(o.DataRoot, "chaosbench-qualify-faults-")
		if err != nil {
			return nil, fmt.Errorf("fault step: --data-root: %w", err)
		}
		defer os.RemoveAll(data)
		if err := os.Symlink(data, filepath.Join(stepDir, "members")); err != nil {
			return nil, err
		}
	}
	log, err := os.Create(filepath.Join(stepDir, "run.log"))
	if err != nil {
		return nil, err
	}
	defer log.Close()
	s := o.faultScenario(class, stepDir, seed)
	fmt.Fprintf(o.Log, "faults at %s: %s of kube load with a leader kill and a leader partition, log %s\n", class, s.Duration, log.Name())
	sum, runErr := Run(ctx, s, o.stepEnv(log, "faults at "+class))
	if sum == nil {
		if outcome.IsUsage(runErr) {
			return nil, runErr
		}
		return &FaultStep{Class: class, Dir: "faults-" + class, Verdict: StepUndecided, Reasons: []string{fmt.Sprintf("the step did not run: %v", runErr)},
			Outcome: outcome.Decide(outcome.New(outcome.HarnessError, "the step did not run: %v", runErr))}, nil
	}
	st := judgeFaultStep(class, sum, 2*etcdFlagMs(o.Scenario.EtcdFlags, "election-timeout", 1000))
	st.Dir = "faults-" + class
	return st, nil
}

// faultScenario is the ladder's step at class with the default fault schedule and no latency thresholds:
// under faults, latency and leader changes are expected; the write gap is what is judged.
func (o *QualifyOptions) faultScenario(class, dir string, seed int64) Scenario {
	s := o.stepScenario(class, dir, seed)
	s.Name = "qualify-faults-" + class
	s.Thresholds = o.Scenario.Thresholds
	s.Faults.Schedule = []string{"default"}
	return s
}

// judgeFaultStep decides the fault step from its summary: its run's outcome (results.Decide: a violation, a
// crashed member, an undecided check, a skipped fault, the user's thresholds), with the write gaps judged
// beside it: a fault after which writes stopped longer than limitMs, or never resumed, or that was not
// recovered, fails a threshold; a step in which no fault was injected tested nothing and is undecided.
func judgeFaultStep(class string, s *results.Summary, limitMs float64) *FaultStep {
	st := &FaultStep{Class: class, LimitMs: limitMs, Observed: observe(s)}
	run := results.Decide(s)
	rs := slices.Clone(run.Reasons)
	if len(s.Faults) == 0 {
		rs = append(rs, outcome.New(outcome.Undecided, "no fault was injected"))
	}
	for _, w := range s.Faults {
		g := FaultGap{Fault: w.Spec, Recovered: w.Outcome == "recovered"}
		if g.Fault == "" {
			g.Fault = w.Fault
		}
		if a := w.Availability; a != nil {
			g.WriteGapMs = a.WriteGapMs
			if a.WriteGapOpen {
				rs = append(rs, outcome.New(outcome.ThresholdFailed, "%s: writes had not resumed when the observation ended", g.Fault))
			} else if a.WriteGapMs > limitMs {
				rs = append(rs, outcome.New(outcome.ThresholdFailed, "%s: writes stopped for %.0f ms > %.0f ms (twice the election timeout)", g.Fault, a.WriteGapMs, limitMs))
			}
		} else {
			rs = append(rs, outcome.New(outcome.ThresholdFailed, "%s: no write gap was measured", g.Fault))
		}
		if !g.Recovered {
			rs = append(rs, outcome.New(outcome.ThresholdFailed, "%s: %s", g.Fault, w.Outcome))
		}
		st.Windows = append(st.Windows, g)
	}
	st.Outcome = outcome.Decide(rs...)
	st.Verdict = stepVerdict(st.Outcome)
	if st.Verdict != StepPass {
		st.Reasons = st.Outcome.Texts(st.Outcome.Kind)
	}
	return st
}

// text is the fault step's result in words, for the verdict line and the reports; its outcome is Outcome.
func (f *FaultStep) text() string {
	switch f.Verdict {
	case StepPass:
		var gaps []string
		for _, w := range f.Windows {
			gaps = append(gaps, fmt.Sprintf("%s %.0f ms", w.Fault, w.WriteGapMs))
		}
		return fmt.Sprintf("holds under faults at %s (write gaps %s, limit %.0f ms)", f.Class, strings.Join(gaps, ", "), f.LimitMs)
	case StepFail:
		return fmt.Sprintf("not under faults at %s: %s", f.Class, strings.Join(f.Reasons, "; "))
	}
	return fmt.Sprintf("faults at %s undecided: %s", f.Class, strings.Join(f.Reasons, "; "))
}
