package report

import (
	"fmt"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// verdictRow is one card of the verdict table at the top of the report. A card is either part of the
// verdict, and then shows exactly what the judge decided of its area (Kind, from results.Areas or from the
// thresholds it stands for), or informational: a figure the run was not judged on, which never says pass or
// fail and is never coloured as a verdict (Class info or warn).
type verdictRow struct {
	Area, Verdict, Class, Detail string
	// Informational marks a card that is not part of the verdict.
	Informational bool
	// Kind is the decision a verdict card shows (OK when its area passed); empty for an informational card.
	Kind outcome.Kind
}

// judged returns a verdict card showing o, the decision of its area: its class is the outcome's.
func judged(area, verdict, detail string, o outcome.Outcome) verdictRow {
	return verdictRow{Area: area, Verdict: verdict, Detail: detail, Kind: o.Kind, Class: o.Class()}
}

// informational returns a card that is not part of the verdict: class info, or warn for a figure worth a
// look.
func informational(area, verdict, detail string, warn bool) verdictRow {
	c := verdictRow{Area: area, Verdict: verdict, Detail: detail, Informational: true, Class: "info"}
	if warn {
		c.Class = "warn"
	}
	return c
}

// verdicts builds the verdict table at the top of the report: one card per area, each judged on its own by
// the one judge (results.Areas), so that a run on target with a consistency violation says both instead of
// one averaged word, and no card says other than the headline.
func (v *view) verdicts(r *Run) {
	areas := map[string]outcome.Outcome{}
	for _, a := range results.Areas(r.Summary) {
		areas[a.Name] = a.Outcome
	}
	v.Verdicts = append(v.Verdicts,
		throughputVerdict(r.Summary),
		thresholdsVerdict(r.Summary.Thresholds, areas[results.AreaThresholds]),
		consistencyVerdict(r.Summary, areas[results.AreaConsistency]))
	if o := areas[results.AreaMembers]; o.Kind != outcome.OK {
		v.Verdicts = append(v.Verdicts, judged("Members", "crashed", strings.Join(o.Texts(), "; "), o))
	}
	if o := areas[results.AreaRun]; o.Kind != outcome.OK {
		word := "harness error"
		if o.Kind == outcome.Incomplete {
			word = "interrupted"
		}
		v.Verdicts = append(v.Verdicts, judged("Run", word, strings.Join(o.Texts(), "; "), o))
	}
	v.Verdicts = append(v.Verdicts, availabilityVerdict(r, areas[results.AreaAvailability]))
	if hv, ok := healthVerdict(r); ok {
		v.Verdicts = append(v.Verdicts, hv)
	}
}

// throughputVerdict sets the request rate against an open-loop schedule's target: informational (a
// threshold on throughput, or the default that some request succeeded, is what judges it). The target is a
// rate of requests: watch events, which nobody sends, are shown beside it and never count towards it.
func throughputVerdict(s *results.Summary) verdictRow {
	reqRate, eventRate := results.Rates(s.Operations)
	requests := results.Requests(s.Operations)
	events := ""
	if eventRate > 0 {
		events = fmt.Sprintf("; beside them %.1f watch events/s", eventRate)
	}
	switch {
	case requests == 0:
		return informational("Throughput", "no request", "no request was measured", true)
	case s.Schedule.Mode == "open" && s.Schedule.TargetRate > 0:
		ratio := reqRate / s.Schedule.TargetRate
		// Only requests are scheduled, so only they can start late.
		late := 100 * float64(s.Schedule.MissedBacklog+s.Schedule.MissedLag) / float64(requests)
		detail := fmt.Sprintf("%.1f requests/s of the %.0f requests/s target (%.1f%%); %.2f%% of requests started late%s", reqRate, s.Schedule.TargetRate, 100*ratio, late, events)
		switch {
		case ratio < throughputShortfall:
			return informational("Throughput", "short of target", detail, true)
		case late > missedLimitPercent:
			return informational("Throughput", "on target, late starts", detail, true)
		}
		return informational("Throughput", "on target", detail, false)
	}
	return informational("Throughput", "closed loop", fmt.Sprintf("%.1f requests/s with %d clients flat out%s", reqRate, s.Schedule.Clients, events), false)
}

// thresholdsVerdict shows the thresholds' decision, naming each failed one with what was observed, so that
// the verdict table alone says what to look at.
func thresholdsVerdict(ts []results.ThresholdResult, o outcome.Outcome) verdictRow {
	failed := results.FailedThresholds(ts)
	switch {
	case len(ts) == 0:
		return informational("Thresholds", "none set", "set with --threshold, e.g. put:p99<25ms or etcd-hardware", false)
	case failed > 0:
		var names []string
		for _, t := range ts {
			if t.Verdict == results.ThresholdFail {
				names = append(names, fmt.Sprintf("%s (%s)", t.Expr, t.Observed))
			}
		}
		return judged("Thresholds", "fail", fmt.Sprintf("%d of %d failed: %s", failed, len(ts), strings.Join(names, ", ")), o)
	}
	return judged("Thresholds", "pass", fmt.Sprintf("all %d passed", len(ts)), o)
}

// consistencyVerdict shows the checks' decision, with the known issues they found. A violation outranks
// everything, and a check that could not decide is undecided, never a pass; a known issue is named, and is a
// violation when the policy says so.
func consistencyVerdict(s *results.Summary, o outcome.Outcome) verdictRow {
	var okNames, nothing []string
	for _, c := range s.Checks {
		switch c.Verdict {
		case results.VerdictOK:
			okNames = append(okNames, c.Name)
		case results.VerdictNothing:
			nothing = append(nothing, c.Name)
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
	reasons := strings.Join(append(o.Texts(), detail...), "; ")
	switch {
	case o.Kind == outcome.Violation && len(s.KnownIssues) > 0 && !hasViolation(s.Checks):
		return judged("Consistency", "known issue, failing by policy", reasons, o)
	case o.Kind == outcome.Violation:
		return judged("Consistency", "violation", reasons, o)
	case o.Kind == outcome.Undecided:
		return judged("Consistency", "undecided", reasons, o)
	case o.Kind == outcome.KnownIssue:
		return judged("Consistency", "known issue", reasons, o)
	case len(s.Checks) == 0:
		c := judged("Consistency", "not checked", "no consistency check ran", o)
		c.Class = "info"
		return c
	case len(okNames) == 0:
		c := judged("Consistency", results.VerdictNothing, reasons, o)
		c.Class = "info"
		return c
	}
	return judged("Consistency", "ok", reasons, o)
}

func hasViolation(checks []results.Check) bool {
	for _, c := range checks {
		if c.Verdict == results.VerdictViolation {
			return true
		}
	}
	return false
}

// availabilityVerdict shows, in a run with faults, whether the cluster recovered from every one (the fault
// runner's judgement, a reason of the outcome when it did not), with the longest gap without a successful
// request beside it; without faults nothing about availability is judged, and the card is informational.
func availabilityVerdict(r *Run, o outcome.Outcome) verdictRow {
	g, measured := r.LongestGap()
	if len(r.Faults) == 0 && o.Kind == outcome.OK {
		switch {
		case !measured:
			return informational("Availability", "not measured", "no request history or time series", false)
		case g.Seconds >= 1:
			return informational("Availability", "stalled", fmt.Sprintf("no faults; longest time without a successful %s: %s", gapKind(g), fmtSeconds(g.Seconds)), true)
		}
		return informational("Availability", "no faults", fmt.Sprintf("longest time without a successful %s: %s", gapKind(g), fmtSeconds(g.Seconds)), false)
	}
	detail := plural(int64(len(r.Faults)), "fault")
	if measured {
		detail += fmt.Sprintf("; longest %s gap %s (%s)", gapKind(g), fmtSeconds(g.Seconds), g.Label())
	}
	open := 0
	for _, gg := range r.Gaps {
		if !gg.Recovered {
			open++
		}
	}
	if open > 0 {
		detail += fmt.Sprintf("; in %d, no %s had succeeded again when the observation ended", open, gapKind(g))
	}
	if o.Kind != outcome.OK {
		return judged("Availability", "not recovered", strings.Join(append(o.Texts(), detail), "; "), o)
	}
	return judged("Availability", "recovered", detail, o)
}

// healthVerdict sums up etcd's health from its own metrics, counting the diagnosis' problems of the server
// (disk, leader, network, CPU, apply, quota): informational (etcd-hardware and leader_changes thresholds
// judge these figures); a run without server metrics has no such card (ok is false).
func healthVerdict(r *Run) (verdictRow, bool) {
	sv := r.Summary.Server
	if sv == nil || len(sv.Members) == 0 {
		return verdictRow{}, false
	}
	c := sv.Cluster
	detail := fmt.Sprintf("WAL fsync p99 %s, backend commit p99 %s (worst member), %s", fmtMs(c.WALFsync.P99), fmtMs(c.BackendCommit.P99), plural(c.LeaderChanges, "leader change"))
	problems := 0
	for _, f := range r.Diagnosis {
		if f.Severity == results.SeverityProblem && (f.Topic == "disk" || f.Topic == "leader" || f.Topic == "network" || f.Topic == "cpu" || f.Topic == "apply" || f.Topic == "quota") {
			problems++
		}
	}
	if problems > 0 {
		return informational("etcd health", fmt.Sprintf("%d problems", problems), detail, true), true
	}
	return informational("etcd health", "healthy", detail, false), true
}
