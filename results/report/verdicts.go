package report

import (
	"fmt"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// verdicts builds the verdict table at the top of the report: one row per area, each judged on its own, so
// that a run on target with a consistency violation says both instead of one averaged word.
func (v *view) verdicts(r *Run) {
	v.Verdicts = append(v.Verdicts,
		throughputVerdict(r.Summary),
		thresholdsVerdict(r.Thresholds),
		consistencyVerdict(r.Summary.Checks),
		availabilityVerdict(r))
	if hv, ok := healthVerdict(r); ok {
		v.Verdicts = append(v.Verdicts, hv)
	}
}

// throughputVerdict judges the request rate against an open-loop schedule's target. The target is a rate
// of requests: watch events, which nobody sends, are shown beside it and never count towards it.
func throughputVerdict(s *results.Summary) verdictRow {
	tp := verdictRow{Area: "Throughput"}
	reqRate, eventRate := results.Rates(s.Operations)
	requests := results.Requests(s.Operations)
	events := ""
	if eventRate > 0 {
		events = fmt.Sprintf("; beside them %.1f watch events/s", eventRate)
	}
	switch {
	case requests == 0:
		tp.Verdict, tp.Class, tp.Detail = "none", "fail", "no request was measured"
	case s.Schedule.Mode == "open" && s.Schedule.TargetRate > 0:
		ratio := reqRate / s.Schedule.TargetRate
		// Only requests are scheduled, so only they can start late.
		late := 100 * float64(s.Schedule.MissedBacklog+s.Schedule.MissedLag) / float64(requests)
		tp.Detail = fmt.Sprintf("%.1f requests/s of the %.0f requests/s target (%.1f%%); %.2f%% of requests started late%s", reqRate, s.Schedule.TargetRate, 100*ratio, late, events)
		switch {
		case ratio < throughputShortfall:
			tp.Verdict, tp.Class = "short of target", "warn"
		case late > missedLimitPercent:
			tp.Verdict, tp.Class = "on target, late starts", "warn"
		default:
			tp.Verdict, tp.Class = "on target", "ok"
		}
	default:
		tp.Verdict, tp.Class = "closed loop", "info"
		tp.Detail = fmt.Sprintf("%.1f requests/s with %d clients flat out%s", reqRate, s.Schedule.Clients, events)
	}
	return tp
}

// thresholdsVerdict sums up the thresholds' results, naming each failed one with what was observed, so
// that the verdict table alone says what to look at.
func thresholdsVerdict(ts []results.ThresholdResult) verdictRow {
	th := verdictRow{Area: "Thresholds"}
	failed := results.FailedThresholds(ts)
	switch {
	case len(ts) == 0:
		th.Verdict, th.Class, th.Detail = "none set", "info", "set with --threshold, e.g. put:p99<25ms or etcd-hardware"
	case failed > 0:
		th.Verdict, th.Class = "fail", "fail"
		var names []string
		for _, t := range ts {
			if t.Verdict == results.ThresholdFail {
				names = append(names, fmt.Sprintf("%s (%s)", t.Expr, t.Observed))
			}
		}
		th.Detail = fmt.Sprintf("%d of %d failed: %s", failed, len(ts), strings.Join(names, ", "))
	default:
		th.Verdict, th.Class = "pass", "ok"
		th.Detail = fmt.Sprintf("all %d passed", len(ts))
	}
	return th
}

// consistencyVerdict sums up the consistency checks. A violation outranks everything, and a check that
// could not decide is a failure, never a pass: only checks that found the history ok make it "ok".
func consistencyVerdict(checks []results.Check) verdictRow {
	cs := verdictRow{Area: "Consistency"}
	var okNames, nothing, violations, undecided []string
	for _, c := range checks {
		switch c.Verdict {
		case results.VerdictOK:
			okNames = append(okNames, c.Name)
		case results.VerdictNothing:
			nothing = append(nothing, c.Name)
		case results.VerdictViolation:
			violations = append(violations, c.Name+": violation")
		default:
			undecided = append(undecided, c.Name+": "+c.Verdict)
		}
	}
	var detail []string
	for _, group := range []struct {
		names []string
		what  string
	}{{okNames, "ok"}, {nothing, results.VerdictNothing}} {
		if len(group.names) > 0 {
			detail = append(detail, strings.Join(group.names, ", ")+": "+group.what)
		}
	}
	switch {
	case len(checks) == 0:
		cs.Verdict, cs.Class, cs.Detail = "not checked", "info", "no consistency check ran"
	case len(violations) > 0:
		// A violation is never shown as anything else, whatever else the checks said.
		cs.Verdict, cs.Class, cs.Detail = "violation", "fail", strings.Join(append(violations, undecided...), "; ")
	case len(undecided) > 0:
		cs.Verdict, cs.Class, cs.Detail = "undecided", "fail", strings.Join(append(undecided, detail...), "; ")
	case len(okNames) == 0:
		cs.Verdict, cs.Class, cs.Detail = results.VerdictNothing, "info", strings.Join(detail, "; ")
	default:
		cs.Verdict, cs.Class, cs.Detail = "ok", "ok", strings.Join(detail, "; ")
	}
	return cs
}

// availabilityVerdict judges the longest gap without a successful request: with faults, whether the
// cluster recovered from every one; without, whether it stalled anyway.
func availabilityVerdict(r *Run) verdictRow {
	av := verdictRow{Area: "Availability"}
	g, ok := r.LongestGap()
	switch {
	case !ok:
		av.Verdict, av.Class, av.Detail = "not measured", "info", "no request history or time series"
	case len(r.Faults) == 0:
		av.Verdict, av.Class = "no faults", "info"
		av.Detail = fmt.Sprintf("longest time without a successful %s: %s", gapKind(g), fmtSeconds(g.Seconds))
		if g.Seconds >= 1 {
			av.Verdict, av.Class = "stalled", "warn"
		}
	default:
		unrecovered := 0
		for _, gg := range r.Gaps {
			if !gg.Recovered {
				unrecovered++
			}
		}
		for _, f := range r.Faults {
			if f.Outcome != "" && f.Outcome != "recovered" {
				unrecovered++
			}
		}
		av.Detail = fmt.Sprintf("%s; longest %s gap %s (%s)", plural(int64(len(r.Faults)), "fault"), gapKind(g), fmtSeconds(g.Seconds), g.Label())
		if unrecovered > 0 {
			av.Verdict, av.Class = "not recovered", "fail"
			av.Detail += fmt.Sprintf("; %d did not recover", unrecovered)
		} else {
			av.Verdict, av.Class = "recovered", "ok"
		}
	}
	return av
}

// healthVerdict judges etcd's health from its own metrics, counting the diagnosis' problems of the server
// (disk, leader, network, CPU, apply, quota); a run without server metrics has no such row (ok is false).
func healthVerdict(r *Run) (verdictRow, bool) {
	sv := r.Summary.Server
	if sv == nil || len(sv.Members) == 0 {
		return verdictRow{}, false
	}
	hv := verdictRow{Area: "etcd health"}
	c := sv.Cluster
	hv.Detail = fmt.Sprintf("WAL fsync p99 %s, backend commit p99 %s (worst member), %s", fmtMs(c.WALFsync.P99), fmtMs(c.BackendCommit.P99), plural(c.LeaderChanges, "leader change"))
	problems := 0
	for _, f := range r.Diagnosis {
		if f.Severity == results.SeverityProblem && (f.Topic == "disk" || f.Topic == "leader" || f.Topic == "network" || f.Topic == "cpu" || f.Topic == "apply" || f.Topic == "quota") {
			problems++
		}
	}
	if problems > 0 {
		hv.Verdict, hv.Class = fmt.Sprintf("%d problems", problems), "warn"
	} else {
		hv.Verdict, hv.Class = "healthy", "ok"
	}
	return hv, true
}
