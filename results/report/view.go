package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

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

	Verdicts   []verdictRow
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

type verdictRow struct {
	Area, Verdict, Class, Detail string
}

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

// genericSection is a summary field the report has no section for, shown as a table (a list of objects),
// key-value pairs (an object) or a value.
type genericSection struct {
	Title   string
	Columns []string
	Rows    [][]string
	Pairs   []kv
	Value   string
}

func buildView(r *Run) *view {
	s := r.Summary
	v := &view{Banner: r.Banner, Name: s.Name, Diagnosis: r.Diagnosis, Thresholds: r.Thresholds, Checks: s.Checks,
		Warnings: r.Warnings, OpenLoop: s.Schedule.Mode == "open"}
	v.overall(r)
	v.verdicts(r)
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
	if failed := Failed(r.Thresholds); len(r.Thresholds) > 0 {
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

func (v *view) verdicts(r *Run) {
	s := r.Summary
	// Throughput.
	// The target is a rate of requests: watch events, which nobody sends, are shown beside it.
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
	v.Verdicts = append(v.Verdicts, tp)

	// Thresholds.
	th := verdictRow{Area: "Thresholds"}
	failed := Failed(r.Thresholds)
	switch {
	case len(r.Thresholds) == 0:
		th.Verdict, th.Class, th.Detail = "none set", "info", "set with --threshold, e.g. put:p99<25ms or etcd-hardware"
	case failed > 0:
		th.Verdict, th.Class = "fail", "fail"
		var names []string
		for _, t := range r.Thresholds {
			if t.Verdict == results.ThresholdFail {
				names = append(names, fmt.Sprintf("%s (%s)", t.Expr, t.Observed))
			}
		}
		th.Detail = fmt.Sprintf("%d of %d failed: %s", failed, len(r.Thresholds), strings.Join(names, ", "))
	default:
		th.Verdict, th.Class = "pass", "ok"
		th.Detail = fmt.Sprintf("all %d passed", len(r.Thresholds))
	}
	v.Verdicts = append(v.Verdicts, th)

	// Consistency.
	cs := verdictRow{Area: "Consistency"}
	var okNames, nothing, violations, undecided []string
	for _, c := range s.Checks {
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
	case len(s.Checks) == 0:
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
	v.Verdicts = append(v.Verdicts, cs)

	// Availability.
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
	v.Verdicts = append(v.Verdicts, av)

	// Server health, from etcd's own metrics.
	if sv := s.Server; sv != nil && len(sv.Members) > 0 {
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
		v.Verdicts = append(v.Verdicts, hv)
	}
}

func (v *view) operations(r *Run) {
	s := r.Summary
	limits := map[string]bool{} // operations whose p99 failed a threshold
	for _, t := range r.Thresholds {
		if t.Verdict == results.ThresholdFail && t.Subject != "" {
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
	if op.Errors == 0 {
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
		if !g.Recovered {
			row.Recovered, row.Class = "no", "fail"
		} else if g.Seconds >= 1 {
			row.Class = "warn"
		}
		if g.Index >= 0 && g.Index < len(r.Faults) {
			row.Outcome = r.Faults[g.Index].Outcome
			if row.Outcome != "" && row.Outcome != "recovered" {
				row.Class = "fail"
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
		mr.FsyncClass = limitClass(m.WALFsync.P99, fsyncLimitMs)
		mr.CommitClass = limitClass(m.BackendCommit.P99, commitLimitMs)
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
		FsyncClass: limitClass(c.WALFsync.P99, fsyncLimitMs), CommitClass: limitClass(c.BackendCommit.P99, commitLimitMs)}
	if g := sv.Generator; g != nil {
		v.Generator = []kv{
			{"chaosbench CPU", fmt.Sprintf("%.0f%% mean, %.0f%% max", g.CPUPercentMean, g.CPUPercentMax)},
			{"machine CPU busy", fmt.Sprintf("%.0f%% mean, %.0f%% max over %d cores; ≥ 90%% in %d of %d seconds", g.HostCPUBusyMean, g.HostCPUBusyMax, g.HostCPUs, g.SaturatedIntervals, g.Intervals)},
			{"chaosbench memory", fmtBytes(g.RSSBytesMax) + " max"},
		}
	}
}

func plural(n int64, what string) string {
	switch {
	case n == 1:
		return "1 " + what
	case strings.HasSuffix(what, "y"):
		return fmt.Sprintf("%d %sies", n, strings.TrimSuffix(what, "y"))
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func limitClass(v, limit float64) string {
	if v > limit {
		return "fail"
	}
	return ""
}

func fmtMsOrDash(v float64, count int64) string {
	if count == 0 {
		return "-"
	}
	return fmtMs(v)
}

func (v *view) environment(r *Run) {
	s := r.Summary
	add := func(k, val string) {
		if val != "" {
			v.Env = append(v.Env, kv{k, val})
		}
	}
	add("chaosbench", s.Versions.Chaosbench)
	add("etcd server", s.Versions.EtcdServer)
	add("etcd client", s.Versions.EtcdClient)
	add("Go", s.Versions.Go)
	if s.Cluster.Backend != "" {
		add("cluster", fmt.Sprintf("%s, %d members", s.Cluster.Backend, s.Cluster.Members))
	}
	add("etcd flags", strings.Join(s.Cluster.EtcdFlags, " "))
	if e := s.Environment; e != nil {
		m := fmt.Sprintf("%s/%s, %d CPUs", e.OS, e.Arch, e.CPUs)
		if e.CPUModel != "" {
			m += " (" + e.CPUModel + ")"
		}
		if e.MemoryBytes > 0 {
			m += ", " + fmtBytes(float64(e.MemoryBytes)) + " memory"
		}
		if e.Kernel != "" {
			m += ", kernel " + e.Kernel
		}
		if e.Container {
			m += ", in a container"
		}
		add("machine", m)
		add("run directory file system", e.RunDirFS)
		if d := e.RunDirDisk; d != nil {
			disk := strings.TrimSpace(fmt.Sprintf("%s on %s", d.Device, d.MountPoint))
			if d.Model != "" {
				disk += ", " + d.Model
			}
			if d.Rotational != nil {
				disk += map[bool]string{true: ", rotational", false: ", solid state"}[*d.Rotational]
			}
			if len(d.MountOptions) > 0 {
				disk += " (" + strings.Join(d.MountOptions, ",") + ")"
			}
			add("run directory disk", disk)
		}
		var limits []string
		if e.CgroupCPUs > 0 {
			limits = append(limits, fmt.Sprintf("%g CPUs", e.CgroupCPUs))
		}
		if e.CgroupMemoryBytes > 0 {
			limits = append(limits, fmtBytes(float64(e.CgroupMemoryBytes))+" memory")
		}
		add("cgroup limits", strings.Join(limits, ", "))
	}
	if c := s.Cluster; c.MemberCPUs > 0 || c.MemberMemoryBytes > 0 {
		var limits []string
		if c.MemberCPUs > 0 {
			limits = append(limits, fmt.Sprintf("%g CPUs", c.MemberCPUs))
		}
		if c.MemberMemoryBytes > 0 {
			limits = append(limits, fmtBytes(float64(c.MemberMemoryBytes))+" memory")
		}
		add("member limits", strings.Join(limits, ", "))
	}
	if sv := s.Server; sv != nil {
		// What each member says of itself: the only facts there are about an external cluster's machines.
		var ms []string
		for _, m := range sv.Members {
			var parts []string
			if m.ServerVersion != "" {
				parts = append(parts, "etcd "+m.ServerVersion)
			}
			if m.GoVersion != "" {
				parts = append(parts, m.GoVersion)
			}
			if m.RSSBytesMax > 0 {
				parts = append(parts, fmtBytes(m.RSSBytesMax)+" resident")
			}
			if m.DBSizeBytes > 0 {
				db := "db " + fmtBytes(m.DBSizeBytes)
				if m.QuotaBackendBytes > 0 {
					db += " of " + fmtBytes(m.QuotaBackendBytes) + " quota"
				}
				parts = append(parts, db)
			}
			if m.GoroutinesMax > 0 {
				parts = append(parts, fmt.Sprintf("%.0f goroutines", m.GoroutinesMax))
			}
			if len(parts) > 0 {
				ms = append(ms, m.Name+": "+strings.Join(parts, ", "))
			}
		}
		add("members", strings.Join(ms, "; "))
	}
	if s.Seed != 0 {
		add("seed", strconv.FormatInt(s.Seed, 10))
	}
	sched := s.Schedule.Mode
	if s.Schedule.Mode == "open" {
		sched = fmt.Sprintf("open loop at %.0f ops/s", s.Schedule.TargetRate)
	}
	add("schedule", fmt.Sprintf("%s, %d clients over %d connections", sched, s.Schedule.Clients, s.Schedule.Conns))
	if !s.Start.IsZero() {
		add("time", fmt.Sprintf("%s to %s (%s; warm-up %s, measured %s)", s.Start.UTC().Format(time.RFC3339), s.End.UTC().Format(time.RFC3339),
			fmtSeconds(s.DurationSeconds), fmtSeconds(s.WarmupSeconds), fmtSeconds(s.MeasuredSeconds)))
	}
	add("command", strings.Join(s.Command, " "))
	if len(s.Config) > 0 {
		var cfg any
		if json.Unmarshal(s.Config, &cfg) == nil {
			flatten("", cfg, &v.Config)
		}
	}
}

// flatten lists a JSON value's leaves as dotted keys, sorted.
func flatten(prefix string, val any, out *[]kv) {
	switch t := val.(type) {
	case map[string]any:
		for _, k := range sortedKeys(t) {
			key := k
			if prefix != "" {
				key = prefix + "." + k
			}
			flatten(key, t[k], out)
		}
	default:
		b, _ := json.Marshal(t)
		*out = append(*out, kv{prefix, compactJSON(b)})
	}
}

// generic renders a summary field the report does not know.
func generic(key string, raw json.RawMessage) genericSection {
	sec := genericSection{Title: key}
	var list []map[string]json.RawMessage
	var rawList []json.RawMessage
	if json.Unmarshal(raw, &list) == nil && len(list) > 0 && json.Unmarshal(raw, &rawList) == nil {
		cols := map[string]bool{}
		var order []string
		for _, item := range rawList {
			for _, k := range objectKeys(item) {
				if !cols[k] {
					cols[k] = true
					order = append(order, k)
				}
			}
		}
		sec.Columns = order
		for _, item := range list {
			row := make([]string, len(order))
			for i, k := range order {
				if v, ok := item[k]; ok {
					row[i] = compactJSON(v)
				}
			}
			sec.Rows = append(sec.Rows, row)
		}
		return sec
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) == nil {
		for _, k := range objectKeys(raw) {
			sec.Pairs = append(sec.Pairs, kv{k, compactJSON(obj[k])})
		}
		return sec
	}
	sec.Value = compactJSON(raw)
	return sec
}

// objectKeys returns the keys of a JSON object in the order they are written.
func objectKeys(raw json.RawMessage) []string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return keys
		}
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return keys
		}
		keys = append(keys, tok.(string))
	}
	return keys
}

// compactJSON shows a JSON value briefly: strings unquoted, numbers rounded, the rest compacted.
func compactJSON(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var f float64
	if json.Unmarshal(raw, &f) == nil {
		if f == math.Trunc(f) && math.Abs(f) < 1e15 {
			return strconv.FormatInt(int64(f), 10)
		}
		return strconv.FormatFloat(round3(f), 'f', -1, 64)
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) == nil {
		out := buf.String()
		if len(out) > 400 {
			out = out[:400] + "…"
		}
		return out
	}
	return string(raw)
}
