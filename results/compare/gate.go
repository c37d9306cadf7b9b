package compare

import (
	"fmt"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// ParseGate parses the figures a --fail-on-regression gate watches: "" or "all" for every figure, else a
// comma-separated list of figure IDs ("create/pods:p99,put:p99") or operations ("put": all its figures).
// It returns nil for all.
func ParseGate(spec string) ([]string, error) {
	spec = strings.TrimSpace(spec)
	if spec == "" || spec == "all" {
		return nil, nil
	}
	var out []string
	for _, f := range strings.Split(spec, ",") {
		f = strings.TrimSpace(f)
		if f == "" || strings.HasPrefix(f, ":") || strings.HasSuffix(f, ":") {
			return nil, outcome.Usagef("--fail-on-regression %q: give figures as op:stat (put:p99), operations (put), or nothing for all", spec)
		}
		out = append(out, f)
	}
	return out, nil
}

// Watched says whether the gate's figures (nil: all) include metric id.
func Watched(figures []string, id string) bool {
	if figures == nil {
		return true
	}
	for _, f := range figures {
		if f == id || (!strings.Contains(f, ":") && strings.HasPrefix(id, f+":")) {
			return true
		}
	}
	return false
}

// Gate decides a comparison for CI: every figure it watches (nil: all) that a variant made significantly
// worse, by more than the practical threshold, is a reason of a threshold-failed outcome (exit code 3),
// named in one line. A figure the gate names that the comparison does not have is a usage error: a typo
// must not pass silently. It returns nil when nothing regressed.
func Gate(r Result, figures []string) error {
	for _, f := range figures {
		found := false
		for _, v := range r.Variants {
			for _, e := range v.Effects {
				found = found || Watched([]string{f}, e.Metric.ID)
			}
		}
		if !found && len(r.Variants) > 0 {
			return outcome.Usagef("--fail-on-regression: no figure %q in this comparison (figures are named like put:p99, put:throughput, etcd:wal_fsync_p99)", f)
		}
	}
	var reasons []outcome.Reason
	for _, v := range r.Variants {
		for _, e := range v.Effects {
			if e.Verdict == Worse && Watched(figures, e.Metric.ID) {
				reasons = append(reasons, outcome.New(outcome.ThresholdFailed, "regression: %s %s %s against %s (Holm-adjusted p %.2g, beyond --min-effect %s)",
					v.Label, e.Metric.ID, e.ChangeText(), r.Baseline, e.PAdjusted, percent(r.MinEffect)))
			}
		}
	}
	return outcome.Decide(reasons...).Err()
}

func percent(f float64) string { return fmt.Sprintf("%.3g%%", 100*f) }
