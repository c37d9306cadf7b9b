package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// view is what every renderer shows, computed once from a run: verdicts, tables and text, already
// formatted. The Markdown and HTML renderers differ only in layout.
type view struct {
	Banner   *Banner
	Name     string
	Overall  string // PASS, FAIL, INCOMPLETE, ERROR
	Class    string // ok, fail, warn
	Headline string
	// Reasons are the outcome's reasons, most severe first, then the problems the scenario allowed.
	Reasons []kv

	Verdicts []verdictRow
	// Crashes are the members that crashed, with the last lines of their logs; Known the findings
	// attributed to known upstream issues (known.go).
	Crashes    []crashView
	Known      []knownView
	Diagnosis  []results.Finding
	Thresholds []results.ThresholdResult
	Ops        []opRow
	ServiceOps []opRow
	Totals     opRow
	Gaps       []gapRow
	GapColumns []string // extra fault fields, in order
	Checks     []results.Check
	Members    []memberRow
	Cluster    *memberRow
	Generator  []kv
	Kube       *kubeView
	Extra      []genericSection
	Env        []kv
	Config     []kv
	Warnings   []string
	OpenLoop   bool
}

type kv struct{ Key, Value string }

type opRow struct {
	Name                     string
	Count, Throughput        string
	P50, P90, P99, P999, Max string
	Errors                   string
	P99Class                 string
	rawCount                 int64
}

type gapRow struct {
	Fault, Window, Gap, ReadGap, Recovered, Requests, Errors, Outcome, Class string
	Extra                                                                    []string
}

type memberRow struct {
	Name, Role, Fsync, Commit, Apply, RTT, LeaderChanges, ProposalsFailed, Pending, DB, CPU, RSS, Scrapes string
	FsyncClass, CommitClass                                                                               string
}

func buildView(r *Run) *view {
	s := r.Summary
	v := &view{Banner: r.Banner, Name: s.Name, Diagnosis: r.Diagnosis, Thresholds: r.Thresholds, Checks: s.Checks,
		Warnings: r.Warnings, OpenLoop: s.Schedule.Mode == "open"}
	v.overall(r)
	v.verdicts(r)
	v.crashes(r)
	v.known(r)
	v.operations(r)
	v.availability(r)
	v.members(r)
	v.generatorLoad(r)
	v.kube(r)
	v.environment(r)
	for _, f := range r.Extra {
		v.Extra = append(v.Extra, generic(f.Key, f.Raw))
	}
	return v
}

// overall heads the report with the run's outcome, the same value the exit code, JUnit and summary.json
// come from (results.Decide): the report never re-decides it.
func (v *view) overall(r *Run) {
	s := r.Summary
	o := s.Verdict()
	v.Overall, v.Class = o.Headline(), o.Class()
	parts := []string{fmt.Sprintf("%s %s: %d operations, %.1f ops/s over %s measured", s.Name, clusterText(s), s.Total.Count, s.Total.Throughput, fmtSeconds(s.MeasuredSeconds))}
	if failed := results.FailedThresholds(r.Thresholds); len(r.Thresholds) > 0 {
		parts = append(parts, fmt.Sprintf("%d of %d thresholds failed", failed, len(r.Thresholds)))
	}
	parts = append(parts, fmt.Sprintf("outcome: %s (exit code %d)", o.Kind, o.ExitCode()))
	v.Headline = strings.Join(parts, "; ")
	for _, rs := range o.Reasons {
		v.Reasons = append(v.Reasons, kv{Key: string(rs.Kind), Value: rs.Text})
	}
	for _, a := range s.Allowed {
		v.Reasons = append(v.Reasons, kv{Key: "allowed", Value: a})
	}
	if now := results.Decide(s); now.Kind != o.Kind {
		// The headline is the outcome the run stored (its exit code); the cards are this version's areas.
		v.Reasons = append(v.Reasons, kv{Key: "note", Value: fmt.Sprintf("this report's version decides %s from the same summary; the headline keeps the outcome the run stored (%s)", now.Kind, o.Kind)})
	}
}

// crashView is a member that crashed, with the last lines of its log.
type crashView struct {
	Title string
	Log   string
	Tail  []string
}

// crashes lists the members that crashed when no fault asked them to, each with the last lines of its log:
// the panic or fatal error that ended it is there, and it is what an upstream report needs first.
func (v *view) crashes(r *Run) {
	for _, c := range r.Summary.Crashes {
		v.Crashes = append(v.Crashes, crashView{Title: c.Text(), Log: c.Log, Tail: c.LogTail})
	}
}

func clusterText(s *results.Summary) string {
	c := s.Cluster
	out := ""
	switch {
	case c.Backend == "embed":
		out = fmt.Sprintf("on a %d-member embedded cluster", c.Members)
	case c.Backend != "":
		out = fmt.Sprintf("on a %d-member %s cluster", c.Members, c.Backend)
	}
	if s.Versions.EtcdServer != "" {
		out += " (etcd " + s.Versions.EtcdServer + ")"
	}
	return out
}

func (v *view) operations(r *Run) {
	s := r.Summary
	limits := map[string]bool{} // operations whose p99 failed a threshold
	for _, t := range r.Thresholds {
		if t.Verdict == results.ThresholdFail && t.Subject != "" && t.Unit == "ms" {
			limits[t.Subject] = true
		}
	}
	row := func(name string, op *results.Operation, l results.Latency, errs string, judged bool) opRow {
		o := opRow{Name: name, Count: strconv.FormatInt(op.Count, 10), Throughput: fmt.Sprintf("%.1f", op.Throughput),
			P50: fmtMs(l.P50), P90: fmtMs(l.P90), P99: fmtMs(l.P99), P999: fmtMs(l.P999), Max: fmtMs(l.Max),
			Errors: errs, rawCount: op.Count}
		if judged && limits[name] {
			o.P99Class = "fail"
		}
		return o
	}
	for _, name := range r.OperationNames() {
		op := s.Operations[name]
		v.Ops = append(v.Ops, row(name, op, op.Response, errorText(op), true))
		if v.OpenLoop {
			v.ServiceOps = append(v.ServiceOps, row(name, op, op.Service, "", false))
		}
	}
	v.Totals = opRow{Name: "total", Count: strconv.FormatInt(s.Total.Count, 10), Throughput: fmt.Sprintf("%.1f", s.Total.Throughput),
		Errors: strconv.FormatInt(s.Total.Errors, 10)}
}

func errorText(op *results.Operation) string {
	if op.Errors == 0 || len(op.ErrorsByClass) == 0 {
		return "0"
	}
	classes := sortedKeys(op.ErrorsByClass)
	parts := make([]string, len(classes))
	for i, c := range classes {
		parts[i] = fmt.Sprintf("%s %d", c, op.ErrorsByClass[c])
	}
	return fmt.Sprintf("%d (%s)", op.Errors, strings.Join(parts, ", "))
}

func (v *view) availability(r *Run) {
	colSet := map[string]bool{}
	for _, m := range r.FaultExtra {
		for k := range m {
			colSet[k] = true
		}
	}
	v.GapColumns = sortedKeys(colSet)
	for _, g := range r.Gaps {
		row := gapRow{Fault: g.Label(), Gap: classGapText(g.Writes, "writes", g.Resolution), ReadGap: classGapText(g.Reads, "reads", g.Resolution),
			Requests: strconv.FormatInt(g.Requests, 10), Errors: strconv.FormatInt(g.Errors, 10), Recovered: "yes", Class: "ok"}
		if g.Kind == "" {
			row.Recovered = "-"
		}
		row.Window = fmt.Sprintf("%s – %s", fmtSeconds(g.WindowStart), fmtSeconds(g.WindowEnd))
		// A gap is a figure of the clients' view; only the fault runner's "not recovered" is a reason of
		// the outcome, and only it is shown as a failure.
		if !g.Recovered {
			row.Recovered, row.Class = "no", "warn"
		} else if g.Seconds >= 1 {
			row.Class = "warn"
		}
		if g.Index >= 0 && g.Index < len(r.Faults) {
			row.Outcome = r.Faults[g.Index].Outcome
			switch {
			case strings.HasPrefix(row.Outcome, "not recovered"):
				row.Class = "fail"
			case row.Outcome != "" && row.Outcome != "recovered":
				row.Class = "warn"
			}
			if e := r.Faults[g.Index].Effect; e != nil && e.Detail != "" {
				// What the fault did, as its members tell (a failpoint's hits, a snapshot sent).
				row.Outcome += " (" + e.Detail + ")"
			}
		}
		for _, col := range v.GapColumns {
			val := ""
			if g.Index >= 0 && g.Index < len(r.FaultExtra) {
				if raw, ok := r.FaultExtra[g.Index][col]; ok {
					val = compactJSON(raw)
				}
			}
			row.Extra = append(row.Extra, val)
		}
		v.Gaps = append(v.Gaps, row)
	}
}

func (v *view) members(r *Run) {
	sv := r.Summary.Server
	if sv == nil || len(sv.Members) == 0 {
		return
	}
	fsyncFailed, commitFailed := failedServerLimits(r.Thresholds, "wal_fsync"), failedServerLimits(r.Thresholds, "backend_commit")
	row := func(m results.MemberMetrics) memberRow {
		role := "follower"
		if m.Leader {
			role = "leader"
		}
		mr := memberRow{Name: m.Name, Role: role,
			Fsync: fmtMsOrDash(m.WALFsync.P99, m.WALFsync.Count), Commit: fmtMsOrDash(m.BackendCommit.P99, m.BackendCommit.Count),
			Apply: fmtMsOrDash(m.Apply.P99, m.Apply.Count), RTT: fmtMsOrDash(m.PeerRTT.P99, m.PeerRTT.Count),
			LeaderChanges: strconv.FormatInt(m.LeaderChanges, 10), ProposalsFailed: strconv.FormatInt(m.ProposalsFailed, 10),
			Pending: trimFloat(m.ProposalsPending), DB: fmtBytes(m.DBSizeBytes),
			CPU: fmt.Sprintf("%.0f%% (max %.0f%%)", m.CPUPercentMean, m.CPUPercentMax), RSS: fmtBytes(m.RSSBytesMax),
			Scrapes: fmt.Sprintf("%d (%d failed)", m.Scrapes, m.Failed)}
		mr.FsyncClass = limitClass(m.WALFsync.P99, m.WALFsync.Count, fsyncLimitMs, fsyncFailed)
		mr.CommitClass = limitClass(m.BackendCommit.P99, m.BackendCommit.Count, commitLimitMs, commitFailed)
		return mr
	}
	for _, m := range sv.Members {
		v.Members = append(v.Members, row(m))
	}
	c := sv.Cluster
	v.Cluster = &memberRow{Name: "cluster (worst)", Fsync: fmtMsOrDash(c.WALFsync.P99, c.WALFsync.Count),
		Commit: fmtMsOrDash(c.BackendCommit.P99, c.BackendCommit.Count), Apply: fmtMsOrDash(c.Apply.P99, c.Apply.Count),
		RTT: fmtMsOrDash(c.PeerRTT.P99, c.PeerRTT.Count), LeaderChanges: strconv.FormatInt(c.LeaderChanges, 10),
		ProposalsFailed: strconv.FormatInt(c.ProposalsFailed, 10), Pending: trimFloat(c.ProposalsPending), DB: fmtBytes(c.DBSizeBytes),
		FsyncClass: limitClass(c.WALFsync.P99, c.WALFsync.Count, fsyncLimitMs, fsyncFailed), CommitClass: limitClass(c.BackendCommit.P99, c.BackendCommit.Count, commitLimitMs, commitFailed)}
	if g := sv.Generator; g != nil {
		v.Generator = []kv{
			{"chaosbench CPU", fmt.Sprintf("%.0f%% mean, %.0f%% max", g.CPUPercentMean, g.CPUPercentMax)},
			{"machine CPU busy", fmt.Sprintf("%.0f%% mean, %.0f%% max over %d cores; ≥ 90%% in %d of %d seconds", g.HostCPUBusyMean, g.HostCPUBusyMax, g.HostCPUs, g.SaturatedIntervals, g.Intervals)},
			{"chaosbench memory", fmtBytes(g.RSSBytesMax) + " max"},
		}
	}
}

// fmtMs formats milliseconds as every figure of a report is: results.FormatMs, three significant figures.
func fmtMs(v float64) string { return results.FormatMs(v) }

func round3(v float64) float64 { return math.Round(v*1000) / 1000 }

func plural(n int64, what string) string {
	switch {
	case n == 1:
		return "1 " + what
	case strings.HasSuffix(what, "y"):
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(what, "y"))
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// limitClass colours a member's p99 of one of etcd's histograms: fail when it breaks a p99 threshold the
// run failed on that histogram (the worst member decided it, and every member over its limit is shown
// so), warn when it is over etcd's guidance but no failed threshold judged it, since only thresholds are
// part of the verdict.
func limitClass(p99 float64, count int64, guidance float64, failed []results.Threshold) string {
	if count == 0 {
		return ""
	}
	for _, th := range failed {
		if !th.Holds(p99) {
			return "fail"
		}
	}
	if p99 > guidance {
		return "warn"
	}
	return ""
}

// failedServerLimits returns the p99 thresholds on one of etcd's histograms (subject) that the run failed.
func failedServerLimits(ts []results.ThresholdResult, subject string) []results.Threshold {
	var out []results.Threshold
	for _, t := range ts {
		if t.Verdict != results.ThresholdFail {
			continue
		}
		if th, err := results.ParseThresholds([]string{t.Expr}); err == nil && len(th) == 1 && th[0].Subject == subject && th[0].Stat == "p99" {
			out = append(out, th[0])
		}
	}
	return out
}

func fmtMsOrDash(v float64, count int64) string {
	if count == 0 {
		return "-"
	}
	return fmtMs(v)
}
