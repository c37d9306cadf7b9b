package chaosbench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/etcd-chaosbench/chaosbench/clusters/diskprobe"
	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// write writes qualification.json and qualification.md into dir.
func (q *Qualification) write(dir string) error {
	b, err := json.MarshalIndent(q, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", QualificationFile, err)
	}
	if err := os.WriteFile(filepath.Join(dir, QualificationFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", QualificationFile, err)
	}
	var md, page bytes.Buffer
	q.writeMarkdown(&md)
	if err := os.WriteFile(filepath.Join(dir, QualificationReport), md.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", QualificationReport, err)
	}
	if err := q.writeHTML(&page); err != nil {
		return fmt.Errorf("render %s: %w", QualificationPage, err)
	}
	if err := os.WriteFile(filepath.Join(dir, QualificationPage), page.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", QualificationPage, err)
	}
	return nil
}

// writeHTML renders qualification.html: the verdict first, then the ladder (each class links its step's
// report.html), and what the disk, network and fault steps found.
func (q *Qualification) writeHTML(w io.Writer) error {
	type row struct {
		Cells []string
		Link  string
		Class string
	}
	var rows []row
	for _, st := range q.Steps {
		class := "ok"
		switch st.Verdict {
		case StepFail:
			class = "fail"
		case StepUndecided:
			class = "warn"
		}
		rows = append(rows, row{Cells: stepRow(st), Link: st.Dir + "/report.html", Class: class})
	}
	var notes []string
	for _, st := range q.Steps {
		if st.Verdict == StepPass {
			continue
		}
		for _, r := range st.Reasons {
			notes = append(notes, fmt.Sprintf("%s is %s (%s): %s", st.Class, st.Verdict, st.Resource, r))
		}
		for _, e := range st.Evidence {
			notes = append(notes, fmt.Sprintf("%s evidence: %s", st.Class, e))
		}
	}
	notes = append(notes, q.earlyLines()...)
	var extra []string
	if q.Disk != nil {
		extra = append(extra, "disk: "+q.Disk.Verdict)
	}
	for _, h := range q.MemberDisks {
		extra = append(extra, fmt.Sprintf("disk of %s: %s", h.Source, h.Disk.Verdict))
	}
	if q.Network != nil {
		extra = append(extra, "network: "+q.Network.Verdict)
	}
	if f := q.Faults; f != nil {
		extra = append(extra, "under faults: "+f.text())
	}
	var reasons []string
	for _, r := range q.Outcome.Reasons {
		reasons = append(reasons, r.String())
	}
	return qualificationPage.Execute(w, struct {
		Title, Verdict, Badge, Headline, Kind, Cluster string
		Header                                         []string
		Rows                                           []row
		Reasons, Notes, Extra                          []string
		Seed                                           int64
		Exit                                           int
	}{q.title(), q.Verdict, q.Outcome.Class(), q.Outcome.Headline(), string(q.Outcome.Kind), q.Cluster.describe(), stepHeader, rows, reasons, notes, extra, q.Seed, q.ExitCode})
}

// title is the page's title: the outcome and the class qualified for, without the reasons' words (a
// check-perf load's PASS under a FAIL would say two things).
func (q *Qualification) title() string {
	t := fmt.Sprintf("chaosbench qualification: %s (%s)", q.Outcome.Headline(), q.Outcome.Kind)
	switch {
	case q.CompatLoad != "":
		t += ", etcdctl check perf's loads"
	case q.Qualified != "":
		t += ", qualified for " + q.Qualified
	default:
		t += ", no class qualified"
	}
	return t
}

// describe is the cluster in one sentence, as the steps observed it.
func (c QualifiedCluster) describe() string {
	members := "members not observed (no step ran)"
	switch {
	case c.Members == 1:
		members = "1 member"
	case c.Members > 1:
		members = fmt.Sprintf("%d members", c.Members)
	}
	backend := c.Backend
	if backend == "" {
		backend = "backend not recorded"
	}
	out := fmt.Sprintf("%s, %s", backend, members)
	if c.EtcdVersion != "" {
		out += ", etcd " + c.EtcdVersion
	}
	if c.DataRoot != "" {
		out += ", data on " + c.DataRoot
	}
	if c.Machine != "" {
		out += "; machine: " + c.Machine
	}
	return out
}

var qualificationPage = template.Must(template.New("qualification").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>
body { font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 24px; color: #1f2328; }
.badge { display: inline-block; padding: 2px 10px; border-radius: 12px; color: #fff; font-weight: 600; margin-right: 8px; }
.badge.ok { background: #1a7f37; } .badge.fail { background: #cf222e; } .badge.warn { background: #9a6700; }
table { border-collapse: collapse; margin: 10px 0; } th, td { border: 1px solid #d0d7de; padding: 3px 8px; text-align: right; }
th { background: #f6f8fa; } td:first-child { text-align: left; } tr.fail td:last-child { color: #cf222e; font-weight: 600; }
tr.warn td:last-child { color: #9a6700; font-weight: 600; } tr.ok td:last-child { color: #1a7f37; }
</style></head><body>
<h1><span class="badge {{.Badge}}">{{.Headline}}</span>{{.Verdict}}</h1>
<p>outcome: {{.Kind}} (exit code {{.Exit}}); seed {{.Seed}}; each class links its step's own report</p>
{{if .Reasons}}<ul>{{range .Reasons}}<li>{{.}}</li>{{end}}</ul>{{end}}
<p>cluster: {{.Cluster}}</p>
{{if .Rows}}<table><tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr>
{{range $r := .Rows}}<tr class="{{$r.Class}}">{{range $i, $c := $r.Cells}}<td>{{if eq $i 0}}<a href="{{$r.Link}}">{{$c}}</a>{{else}}{{$c}}{{end}}</td>{{end}}</tr>
{{end}}</table>{{end}}
{{if .Notes}}<ul>{{range .Notes}}<li>{{.}}</li>{{end}}</ul>{{end}}
{{range .Extra}}<p>{{.}}</p>{{end}}
</body></html>
`))

func msOrDash(v float64) string {
	if v == 0 {
		return "-"
	}
	return diskprobe.Ms(v)
}

// stepRow is one step as table cells.
func stepRow(st Step) []string {
	verdict := strings.ToUpper(st.Verdict)
	switch {
	case st.Resource != "":
		verdict += " (" + st.Resource + ")"
	case st.Outcome.Kind == outcome.KnownIssue:
		verdict += " (known issue)"
	}
	return []string{st.Class, fmt.Sprint(st.Nodes), fmt.Sprintf("%.0f / %.0f", st.Throughput, st.PlannedRate),
		msOrDash(st.MutatingP99), msOrDash(st.GetP99), msOrDash(st.ListP99), msOrDash(st.WALFsyncP99), msOrDash(st.CommitP99),
		fmt.Sprint(st.LeaderChanges), fmt.Sprintf("%.0f%%", st.MemberCPUMax), verdict}
}

var stepHeader = []string{"class", "nodes", "req/s (got / plan)", "mutating p99", "get p99", "list p99", "WAL fsync p99", "commit p99", "leader changes", "member CPU", "verdict"}

// writeTable prints the steps (and the compat loads) as a plain-text table, after the verdict line.
func (q *Qualification) writeTable(w io.Writer) {
	if len(q.Steps) > 0 {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, strings.Join(stepHeader, "\t")+"\t")
		for _, st := range q.Steps {
			fmt.Fprintln(tw, strings.Join(stepRow(st), "\t")+"\t")
		}
		tw.Flush()
	}
	for _, st := range q.Steps {
		if st.Verdict == StepPass {
			continue
		}
		for _, r := range st.Reasons {
			fmt.Fprintf(w, "%s: %s\n", st.Class, r)
		}
		for _, e := range st.Evidence {
			fmt.Fprintf(w, "%s evidence (%s): %s\n", st.Class, st.Resource, e)
		}
	}
	for _, line := range q.earlyLines() {
		fmt.Fprintln(w, line)
	}
	if f := q.Faults; f != nil {
		fmt.Fprintf(w, "faults: %s\n", f.text())
	}
	if q.Disk != nil {
		fmt.Fprintf(w, "disk: %s\n", q.Disk.Verdict)
	}
	if q.Network != nil {
		fmt.Fprintf(w, "network: %s\n", q.Network.Verdict)
	}
	for _, c := range q.Compat {
		v := "PASS"
		if !c.Pass {
			v = "FAIL: " + strings.Join(c.Failures, "; ")
		}
		fmt.Fprintf(w, "etcdctl check perf load %s (%g writes/s, %d clients): %s; %.0f writes/s, slowest %.1f ms, stddev %.1f ms\n",
			c.Load, c.Target, c.Clients, v, c.Throughput, c.SlowestMs, c.StdDevMs)
	}
}

// writeMarkdown renders the qualification for people: the verdict, the ladder, the disk, the network.
func (q *Qualification) writeMarkdown(w io.Writer) {
	fmt.Fprintf(w, "# Qualification: %s\n\n**%s**\n\noutcome: %s (exit code %d)\n\n", q.Outcome.Headline(), q.Verdict, q.Outcome.Kind, q.ExitCode)
	for _, r := range q.Outcome.Reasons {
		fmt.Fprintf(w, "- %s\n", r)
	}
	if len(q.Outcome.Reasons) > 0 {
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "Cluster: %s.\n\n", q.Cluster.describe())
	fmt.Fprintf(w, "Each step: %.0f s of the kube workload after %.0f s of warm-up, open loop; seed %d.\n\n", q.StepSeconds, q.WarmupSeconds, q.Seed)
	if len(q.Steps) > 0 {
		fmt.Fprintln(w, "## Load ladder")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| "+strings.Join(stepHeader, " | ")+" |")
		fmt.Fprintln(w, "|"+strings.Repeat("---|", len(stepHeader)))
	}
	for _, st := range q.Steps {
		row := stepRow(st)
		row[0] = fmt.Sprintf("[%s](%s/report.md)", st.Class, st.Dir)
		fmt.Fprintln(w, "| "+strings.Join(row, " | ")+" |")
	}
	for _, st := range q.Steps {
		if st.Verdict == StepPass {
			continue
		}
		fmt.Fprintf(w, "\n%s is %s (%s):\n", st.Class, st.Verdict, st.Resource)
		for _, r := range st.Reasons {
			fmt.Fprintf(w, "- %s\n", r)
		}
		for _, e := range st.Evidence {
			fmt.Fprintf(w, "- evidence: %s\n", e)
		}
		if st.Context != "" {
			fmt.Fprintf(w, "- figures: %s\n", st.Context)
		}
	}
	if lines := q.earlyLines(); len(lines) > 0 {
		fmt.Fprintln(w)
		for _, line := range lines {
			fmt.Fprintf(w, "- %s\n", line)
		}
	}
	if d := q.Disk; d != nil {
		fmt.Fprintf(w, "\n## Disk (%s)\n\n%s\n\n", d.Probe.Dir, d.Verdict)
		fmt.Fprintln(w, "| pattern | writes | IOPS | MB/s | fdatasync p50 | p99 | p99.9 | max | commit p99 |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|")
		for _, p := range d.Probe.Patterns {
			commit := "-"
			if p.Commit != nil {
				commit = diskprobe.Ms(p.Commit.P99)
			}
			fmt.Fprintf(w, "| %s | %d | %.0f | %.1f | %s | %s | %s | %s | %s |\n", p.Name, p.Writes, p.IOPS, p.BytesPerSecond/1e6,
				diskprobe.Ms(p.Fdatasync.P50), diskprobe.Ms(p.Fdatasync.P99), diskprobe.Ms(p.Fdatasync.P999), diskprobe.Ms(p.Fdatasync.Max), commit)
		}
	}
	if n := q.Network; n != nil {
		fmt.Fprintf(w, "\n## Network\n\n%s\n", n.Verdict)
	}
	if f := q.Faults; f != nil {
		fmt.Fprintf(w, "\n## Under faults ([%s](%s/report.md))\n\n%s\n", f.Class, f.Dir, f.text())
		for _, g := range f.Windows {
			fmt.Fprintf(w, "- %s: write gap %.0f ms (limit %.0f ms), recovered %v\n", g.Fault, g.WriteGapMs, f.LimitMs, g.Recovered)
		}
	}
	if len(q.Compat) > 0 {
		fmt.Fprintln(w, "\n## etcdctl check perf loads (its pass rule)")
		fmt.Fprintln(w)
		fmt.Fprintln(w, "| load | target writes/s | clients | writes/s | errors | slowest | stddev | verdict |")
		fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|")
		for _, c := range q.Compat {
			v := "PASS"
			if !c.Pass {
				v = "FAIL: " + strings.Join(c.Failures, "; ")
			}
			fmt.Fprintf(w, "| %s | %g | %d | %.0f | %d | %.1f ms | %.1f ms | %s |\n", c.Load, c.Target, c.Clients, c.Throughput, c.Errors, c.SlowestMs, c.StdDevMs, v)
		}
	}
}

// earlyLines say which steps ended early and why, and which ran their full time (with --early-stop).
func (q *Qualification) earlyLines() []string {
	var out []string
	for _, st := range q.Steps {
		if e := st.EarlyStop; e != nil {
			out = append(out, fmt.Sprintf("step %s ended early, after %.0f of %.0f s: %s", st.Class, e.AtSeconds, q.StepSeconds, e.Why))
		}
	}
	return out
}
