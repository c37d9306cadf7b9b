package chaosbench

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// CompatLoad is one of `etcdctl check perf`'s loads: puts per second and clients.
type CompatLoad struct {
	Name    string
	Rate    float64
	Clients int
}

// CompatLoads are check perf's loads s, m, l and xl (etcdctl/ctlv3/command/check.go).
var CompatLoads = []CompatLoad{{"s", 150, 50}, {"m", 1000, 200}, {"l", 8000, 500}, {"xl", 15000, 1000}}

// check perf's request shape and pass rule.
const (
	compatKeySize      = 256
	compatValSize      = 1024
	compatSlowestLimit = 500.0 // ms
	compatStdDevLimit  = 100.0 // ms
)

// CompatStep is one check-perf load, judged by check perf's rule: FAIL on any error, on throughput at or
// below 90% of the target, on a slowest request over 0.5 s or a standard deviation over 0.1 s.
type CompatStep struct {
	Load       string   `json:"load"`
	Target     float64  `json:"target_writes_per_s"`
	Clients    int      `json:"clients"`
	Dir        string   `json:"dir"`
	Throughput float64  `json:"writes_per_s"`
	Errors     int64    `json:"errors"`
	SlowestMs  float64  `json:"slowest_ms"`
	StdDevMs   float64  `json:"stddev_ms"`
	Pass       bool     `json:"pass"`
	Failures   []string `json:"failures,omitempty"`
	// Outcome is the load's outcome: its run's (results.Decide) with check perf's rule beside it, each
	// failure of the rule a failed threshold (see judgeCompat).
	Outcome outcome.Outcome `json:"outcome"`
	Observed
}

// runCompat runs check perf's loads from s upwards, stopping at the first that fails, as a user of check
// perf would climb them. Latency is the service time (from the request's actual start), which is what
// check perf measures; our own verdicts use the response time from the intended start.
func (o *QualifyOptions) runCompat(ctx context.Context, dir string, seed int64) ([]CompatStep, error) {
	var out []CompatStep
	loads, err := o.compatLoads()
	if err != nil {
		return nil, err
	}
	for i, l := range loads {
		if ctx.Err() != nil {
			return out, nil
		}
		stepDir := filepath.Join(dir, "compat-"+l.Name)
		if err := os.MkdirAll(stepDir, 0o755); err != nil {
			return out, err
		}
		log, err := os.Create(filepath.Join(stepDir, "run.log"))
		if err != nil {
			return out, err
		}
		s := o.compatScenario(l, stepDir, seed+int64(i))
		fmt.Fprintf(o.Log, "etcdctl-compat %s: %g puts/s from %d clients for %s, log %s\n", l.Name, l.Rate, l.Clients, o.CompatDuration, log.Name())
		sum, runErr := Run(ctx, s, o.stepEnv(log, "etcdctl-compat "+l.Name))
		log.Close()
		if sum == nil {
			return out, fmt.Errorf("etcdctl-compat %s: %w", l.Name, runErr)
		}
		st := judgeCompat(l, sum, stepDir)
		st.Dir = "compat-" + l.Name
		out = append(out, st)
		verdict := "PASS"
		if !st.Pass {
			verdict = "FAIL: " + strings.Join(st.Failures, "; ")
		}
		fmt.Fprintf(o.Log, "etcdctl-compat %s: %s (%.0f writes/s, slowest %.1f ms, stddev %.1f ms)\n", l.Name, verdict, st.Throughput, st.SlowestMs, st.StdDevMs)
		if !st.Pass || !st.Outcome.Passed() {
			break
		}
	}
	return out, nil
}

// compatLoads are the loads to run: one, or with auto all of them from s.
func (o *QualifyOptions) compatLoads() ([]CompatLoad, error) {
	if o.CompatLoad == "auto" {
		return CompatLoads, nil
	}
	for _, l := range CompatLoads {
		if l.Name == o.CompatLoad {
			return []CompatLoad{l}, nil
		}
	}
	return nil, outcome.Usagef("--compat-load %q: auto, s, m, l or xl (etcdctl check perf --load)", o.CompatLoad)
}

// compatScenario is check perf's load l as a put run: 256 B keys, 1 KiB values, at its rate from its clients
// (over at most 100 connections), for CompatDuration, without faults or history.
func (o *QualifyOptions) compatScenario(l CompatLoad, dir string, seed int64) Scenario {
	s := o.Scenario
	s.Name, s.Out, s.Seed = "compat-"+l.Name, dir, seed
	s.Workload, s.Rate, s.Clients, s.Conns = "put", l.Rate, l.Clients, min(l.Clients, 100)
	s.Duration, s.Warmup, s.Total = o.CompatDuration, 0, 0
	s.Micro.KeySize, s.Micro.ValSize, s.Micro.KeySpaceSize, s.Micro.KeyPrefix = compatKeySize, compatValSize, 1<<20, "/etcdctl-check-perf/"
	s.Faults.Schedule = []string{"none"}
	s.Progress = o.Progress
	s.Thresholds = nil
	// check perf checks no history; neither does its mirror, so that the load is the same work.
	s.History, s.Check = false, false
	return s
}

// judgeCompat applies check perf's rule to a put run. Pass is the rule's verdict, to lay beside check perf's
// own; Outcome is the run's outcome (a harness error, a crashed member, an interrupt) with each failure of
// the rule as a failed threshold, and a latency distribution that is not there to judge as undecided.
func judgeCompat(l CompatLoad, s *results.Summary, dir string) CompatStep {
	st := CompatStep{Load: l.Name, Target: l.Rate, Clients: l.Clients, Observed: observe(s)}
	run := results.Decide(s)
	rs := slices.Clone(run.Reasons)
	fail := func(format string, args ...any) {
		st.Failures = append(st.Failures, fmt.Sprintf(format, args...))
		rs = append(rs, outcome.New(outcome.ThresholdFailed, format, args...))
	}
	if op := s.Operations["put"]; op != nil {
		st.Throughput, st.Errors, st.SlowestMs = op.Throughput, op.Errors+op.Failed, op.Service.Max
	}
	sd, err := hgrmStdDev(dir, "put.service.hgrm")
	if err != nil {
		st.Failures = append(st.Failures, fmt.Sprintf("no latency distribution to take the standard deviation of: %v", err))
		rs = append(rs, outcome.New(outcome.Undecided, "no latency distribution to take the standard deviation of: %v", err))
	}
	st.StdDevMs = sd
	if st.Errors > 0 {
		fail("%d requests failed", st.Errors)
	}
	if st.Throughput <= 0.9*l.Rate {
		fail("throughput %.0f writes/s <= 90%% of %g", st.Throughput, l.Rate)
	}
	if st.SlowestMs > compatSlowestLimit {
		fail("slowest request %.0f ms > 500 ms", st.SlowestMs)
	}
	if st.StdDevMs > compatStdDevLimit {
		fail("stddev %.0f ms > 100 ms", st.StdDevMs)
	}
	if s.Incomplete || len(s.Errors) > 0 {
		// check perf fails a load that did not complete; the run's outcome already has why (results.Decide).
		st.Failures = append(st.Failures, "the run did not complete: "+strings.Join(append([]string{s.IncompleteReason}, s.Errors...), "; "))
	}
	st.Pass = len(st.Failures) == 0
	st.Outcome = outcome.Decide(rs...)
	return st
}

// hgrmStdDev reads the standard deviation (ms) from the footer of an HdrHistogram percentile file the run
// wrote ("#[Mean = ..., StdDeviation = ...]"), in the run directory or a sub-folder of it.
func hgrmStdDev(dir, name string) (float64, error) {
	paths, _ := filepath.Glob(filepath.Join(dir, name))
	more, _ := filepath.Glob(filepath.Join(dir, "*", name))
	paths = append(paths, more...)
	if len(paths) == 0 {
		return 0, fmt.Errorf("%s not found in %s", name, dir)
	}
	f, err := os.Open(paths[0])
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		_, after, ok := strings.Cut(line, "StdDeviation")
		if !ok {
			continue
		}
		v := strings.Trim(strings.TrimSpace(strings.TrimLeft(strings.TrimSpace(after), "=")), "]")
		return strconv.ParseFloat(strings.TrimSpace(v), 64)
	}
	return 0, fmt.Errorf("%s: no StdDeviation line", paths[0])
}
