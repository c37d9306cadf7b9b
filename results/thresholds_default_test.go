package results

import (
	"strings"
	"testing"

	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// The defaults are added after the thresholds given, unless one of them has the same subject and statistic.
func TestRunThresholdsDefaults(t *testing.T) {
	tests := []struct {
		name  string
		exprs []string
		want  []string // expr, "*" marking a default
	}{
		{"none given", nil, []string{"requests:succeeded>0*", "requests:errors_outside_faults<5%*"}},
		{"others given", []string{"put:p99<25ms", "errors<1%"}, []string{"put:p99<25ms", "errors<1%", "requests:succeeded>0*", "requests:errors_outside_faults<5%*"}},
		{"share overridden", []string{"requests:errors_outside_faults<1%"}, []string{"requests:errors_outside_faults<1%", "requests:succeeded>0*"}},
		{"both overridden to judge nothing", []string{"requests:succeeded>=0", "requests:errors_outside_faults<=100%"}, []string{"requests:succeeded>=0", "requests:errors_outside_faults<=100%"}},
		// Another subject is another threshold: the whole run's succeeded counts watch events too.
		{"another subject", []string{"succeeded>0"}, []string{"succeeded>0", "requests:succeeded>0*", "requests:errors_outside_faults<5%*"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts, err := RunThresholds(tt.exprs)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, th := range ts {
				e := th.Expr
				if th.Default {
					e += "*"
				}
				got = append(got, e)
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
	if _, err := RunThresholds([]string{"put:p98<1ms"}); !outcome.IsUsage(err) {
		t.Fatalf("a bad threshold: %v", err)
	}
}

// A summary judged as a run is: the thresholds evaluated, the outcome decided from the summary alone.
func judged(t *testing.T, s *Summary, exprs ...string) outcome.Outcome {
	t.Helper()
	ts, err := RunThresholds(exprs)
	if err != nil {
		t.Fatal(err)
	}
	s.Thresholds = EvaluateThresholds(ts, ThresholdEvidence{Summary: s})
	return s.SetOutcome()
}

func ops(kv ...any) map[string]*Operation {
	out := map[string]*Operation{}
	for i := 0; i < len(kv); i += 3 {
		out[kv[i].(string)] = &Operation{Count: int64(kv[i+1].(int)), Errors: int64(kv[i+2].(int))}
	}
	return out
}

func summaryOf(o map[string]*Operation) *Summary {
	return &Summary{Name: "t", Operations: o, Total: Totals(o), Checks: []Check{{Name: "linearizability", Verdict: VerdictOK}}}
}

// withPhases gives a summary faults and the phase tables of its records.
func withPhases(s *Summary, steady, fault, recovery map[string]*Operation) *Summary {
	s.Faults = []FaultWindow{{Fault: "kill", StartNs: 1e9, EndNs: 2e9, Outcome: "recovered"}}
	s.Phases = map[string]*Phase{}
	for name, o := range map[string]map[string]*Operation{PhaseSteady: steady, PhaseFault: fault, PhaseRecovery: recovery} {
		if o != nil {
			s.Phases[name] = &Phase{Operations: o, Total: Totals(o)}
		}
	}
	s.Operations = map[string]*Operation{}
	for _, p := range s.Phases {
		for name, op := range p.Operations {
			all := s.Operations[name]
			if all == nil {
				all = &Operation{}
				s.Operations[name] = all
			}
			all.Count += op.Count
			all.Errors += op.Errors
		}
	}
	s.Total = Totals(s.Operations)
	return s
}

// Nothing passes on nothing: a run in which no request succeeded, or in which more than 5% of the requests
// outside fault windows failed, fails its default thresholds (exit 3); errors inside fault windows do not.
func TestNothingPassesOnNothing(t *testing.T) {
	tests := []struct {
		name   string
		s      *Summary
		exprs  []string
		want   outcome.Kind
		detail string // in the reasons, when failed
	}{
		{"healthy", summaryOf(ops("put", 1000, 0, "range", 1000, 1)), nil, outcome.OK, ""},
		{"no request succeeded", summaryOf(ops("put", 100, 100)), nil, outcome.ThresholdFailed, "0 of 100 requests succeeded"},
		{"no request at all", summaryOf(ops()), nil, outcome.ThresholdFailed, "0 of 0 requests succeeded"},
		// Watch events are not requests: events seen by a watcher do not make a run whose requests all failed.
		{"only watch events", summaryOf(ops("put", 100, 100, "watch", 50, 0)), nil, outcome.ThresholdFailed, "0 of 100 requests succeeded"},
		{"30% errors without faults", summaryOf(ops("put", 700, 300, "range", 300, 0)), nil, outcome.ThresholdFailed, "300 of 1000 requests failed in a run without faults"},
		{"4% errors without faults", summaryOf(ops("put", 1000, 40)), nil, outcome.OK, ""},
		{"30% errors outside faults", withPhases(summaryOf(nil), ops("put", 1000, 300), ops("put", 100, 0), nil), nil, outcome.ThresholdFailed, "300 of 1000 requests failed outside fault windows"},
		{"errors only inside fault windows", withPhases(summaryOf(nil), ops("put", 1000, 0), ops("put", 200, 200), ops("put", 300, 150)), nil, outcome.OK, ""},
		{"errors only while recovering", withPhases(summaryOf(nil), ops("put", 1000, 2), nil, ops("put", 500, 400)), nil, outcome.OK, ""},
		{"the whole load under a fault", withPhases(summaryOf(nil), nil, ops("put", 500, 100), nil), nil, outcome.OK, ""},
		{"overridden: no request succeeded", summaryOf(ops("put", 100, 100)), []string{"requests:succeeded>=0", "requests:errors_outside_faults<=100%"}, outcome.OK, ""},
		{"one overridden, the other still judges", summaryOf(ops("put", 100, 100)), []string{"requests:errors_outside_faults<=100%"}, outcome.ThresholdFailed, "0 of 100 requests succeeded"},
		{"a stricter share", summaryOf(ops("put", 1000, 20)), []string{"requests:errors_outside_faults<1%"}, outcome.ThresholdFailed, "20 of 1000 requests failed"},
		{"a looser share", summaryOf(ops("put", 1000, 300)), []string{"requests:errors_outside_faults<50%"}, outcome.OK, ""},
		// A violation stays a violation: the default thresholds add their reason below it.
		{"violation with nothing succeeded", func() *Summary {
			s := summaryOf(ops("put", 100, 100))
			s.Checks[0].Verdict = VerdictViolation
			return s
		}(), nil, outcome.Violation, "0 of 100 requests succeeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := judged(t, tt.s, tt.exprs...)
			if o.Kind != tt.want {
				t.Fatalf("outcome %s, want %s: %v", o.Kind, tt.want, o)
			}
			wantExit := map[outcome.Kind]int{outcome.OK: 0, outcome.ThresholdFailed: 3, outcome.Violation: 4}[tt.want]
			if o.ExitCode() != wantExit {
				t.Fatalf("exit code %d, want %d", o.ExitCode(), wantExit)
			}
			if tt.detail != "" && !strings.Contains(o.String(), tt.detail) {
				t.Fatalf("outcome %q does not say %q", o, tt.detail)
			}
		})
	}
}

// Without phase tables, the errors outside fault windows are the run's less each fault's observation's, when
// the faults recorded theirs and did not overlap; otherwise they cannot be told, which is not a pass.
func TestOutsideFaultsWithoutPhases(t *testing.T) {
	window := func(start, observedTo, ops, errs int64) FaultWindow {
		return FaultWindow{Fault: "kill", StartNs: start, EndNs: start + 1, Availability: &Availability{Ops: ops, Errors: errs, ObservedToNs: observedTo}}
	}
	tests := []struct {
		name        string
		faults      []FaultWindow
		count, errs int64
		ok          bool
		want        outcome.Kind
	}{
		{"errors inside the windows", []FaultWindow{window(1e9, 2e9, 200, 150), window(3e9, 4e9, 100, 50)}, 700, 0, true, outcome.OK},
		{"errors outside", []FaultWindow{window(1e9, 2e9, 200, 0)}, 800, 200, true, outcome.ThresholdFailed},
		{"overlapping windows", []FaultWindow{window(1e9, 3e9, 200, 150), window(2e9, 4e9, 100, 50)}, 0, 0, false, outcome.ThresholdFailed},
		{"a window without requests of its own", []FaultWindow{{Fault: "kill", StartNs: 1e9}}, 0, 0, false, outcome.ThresholdFailed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := summaryOf(ops("put", 1000, 200))
			s.Faults = tt.faults
			out, where, ok := OutsideFaults(s)
			if ok != tt.ok || out.Count != tt.count || out.Errors != tt.errs {
				t.Fatalf("got %d requests, %d errors, %v (%s); want %d, %d, %v", out.Count, out.Errors, ok, where, tt.count, tt.errs, tt.ok)
			}
			if o := judged(t, s); o.Kind != tt.want {
				t.Fatalf("outcome %v, want %s", o, tt.want)
			}
		})
	}
}
