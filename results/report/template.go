package report

import (
	"html/template"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// pageTemplate returns the report page. Everything it needs is inline: the style sheet, the charts (SVG)
// and one small script, which records any script error on the page (so that a headless browser test, or a
// reader, can see it) and marks the page rendered once every chart has been laid out.
func pageTemplate() *template.Template {
	return template.Must(template.New("report").Funcs(template.FuncMap{
		"sevclass": func(s string) string {
			switch s {
			case "problem":
				return "fail"
			case "warning":
				return "warn"
			}
			return "ok"
		},
		// reasonclass colours a reason of the outcome by its kind: only what fails the run is red.
		"reasonclass": func(k string) string {
			switch k {
			case "allowed", "note", string(outcome.KnownIssue), string(outcome.Incomplete):
				return "warn"
			}
			return "fail"
		},
		// checkclass colours a check's verdict: ok, a known issue (named, passing unless the policy fails
		// it), nothing to check (neither), and everything else, which is not a pass.
		"checkclass": func(v string) string {
			switch v {
			case results.VerdictOK:
				return "ok"
			case results.VerdictKnownIssue:
				return "warn"
			case results.VerdictNothing:
				return ""
			}
			return "fail"
		},
		"vclass": func(s string) string {
			switch s {
			case "fail":
				return "fail"
			case "pass":
				return "ok"
			}
			return "info"
		},
	}).Parse(pageHTML + headTemplate + cssTemplate + scriptTemplate))
}

// headTemplate holds what every page's head has: its meta tags ("meta") and the script that records any
// script error on the page ("errors"), which the headless browser test reads back.
const headTemplate = `{{define "meta"}}<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="chaosbench">
{{end}}{{define "errors"}}<script>
window.chaosbenchErrors = [];
window.addEventListener("error", function (e) {
  window.chaosbenchErrors.push(String(e.message || e));
  document.documentElement.setAttribute("data-js-errors", String(window.chaosbenchErrors.length));
});
</script>
{{end}}`

const cssTemplate = `{{define "css"}}:root { --ok: #1a7f37; --fail: #cf222e; --warn: #9a6700; --info: #57606a; --line: #d0d7de; --bg: #f6f8fa; }
* { box-sizing: border-box; }
body { font: 14px/1.45 -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #1f2328; margin: 0; }
header { padding: 18px 28px 14px; border-bottom: 1px solid var(--line); background: var(--bg); }
header h1 { font-size: 20px; margin: 0 0 6px; }
header .headline { color: #424a53; }
nav { position: sticky; top: 0; background: #fff; border-bottom: 1px solid var(--line); padding: 6px 28px; z-index: 2; font-size: 13px; }
nav a { margin-right: 14px; color: #0969da; text-decoration: none; }
main { padding: 8px 28px 40px; max-width: 1500px; }
h2 { font-size: 17px; margin: 26px 0 10px; padding-bottom: 4px; border-bottom: 1px solid var(--line); }
.badge { display: inline-block; padding: 2px 10px; border-radius: 12px; color: #fff; font-weight: 600; font-size: 13px; vertical-align: middle; margin-right: 8px; }
.badge.ok { background: var(--ok); } .badge.fail { background: var(--fail); } .badge.warn { background: var(--warn); } .badge.info { background: var(--info); }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(260px, 1fr)); gap: 10px; margin-top: 12px; }
.card { border: 1px solid var(--line); border-left: 5px solid var(--info); border-radius: 6px; padding: 8px 12px; background: #fff; }
.card.ok { border-left-color: var(--ok); } .card.fail { border-left-color: var(--fail); } .card.warn { border-left-color: var(--warn); }
.card.informational { border-style: dashed; border-left-style: solid; }
pre.log { font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; background: var(--bg); border: 1px solid var(--line); border-left: 5px solid var(--fail); padding: 6px 10px; overflow-x: auto; white-space: pre-wrap; word-break: break-word; }
.card .area { font-size: 12px; text-transform: uppercase; letter-spacing: .04em; color: var(--info); }
.card .verdict { font-size: 16px; font-weight: 600; }
.card .detail { font-size: 12.5px; color: #424a53; }
ul.findings { list-style: none; padding: 0; margin: 0; }
ul.findings li { padding: 6px 10px; margin: 4px 0; border-radius: 6px; background: var(--bg); border-left: 4px solid var(--info); }
ul.findings li.fail { border-left-color: var(--fail); background: #ffebe9; }
ul.findings li.warn { border-left-color: var(--warn); background: #fff8c5; }
ul.findings li.ok { border-left-color: var(--ok); }
ul.findings .topic { font-weight: 600; margin-right: 6px; }
table { border-collapse: collapse; margin: 6px 0 10px; font-size: 13px; }
th, td { border: 1px solid var(--line); padding: 3px 8px; text-align: right; vertical-align: top; }
th { background: var(--bg); font-weight: 600; }
td:first-child, th:first-child, td.l { text-align: left; }
td.fail { color: var(--fail); font-weight: 600; } td.ok { color: var(--ok); } td.warn { color: var(--warn); }
th.fail { color: var(--fail); } th.warn { color: var(--warn); }
td.wrap { max-width: 700px; text-align: left; word-break: break-word; }
code { font: 12px ui-monospace, SFMono-Regular, Menlo, monospace; }
.charts { display: grid; grid-template-columns: repeat(auto-fill, minmax(560px, 1fr)); gap: 8px; max-width: 1500px; }
.charts.small { grid-template-columns: repeat(auto-fill, minmax(420px, 1fr)); }
figure { margin: 0; border: 1px solid var(--line); border-radius: 6px; padding: 4px; background: #fff; }
svg.chart { width: 100%; height: auto; display: block; }
.note { color: var(--info); font-size: 12.5px; }
.banner { margin: 0 0 10px; padding: 6px 12px; border-radius: 6px; border-left: 5px solid var(--info); background: #fff; }
.banner.ok { border-left-color: var(--ok); } .banner.fail { border-left-color: var(--fail); background: #ffebe9; } .banner.warn { border-left-color: var(--warn); background: #fff8c5; }
@media print { nav { display: none; } .charts, .charts.small { grid-template-columns: 1fr; } }
{{end}}`

const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
{{template "meta"}}<title>chaosbench: {{.Name}} — {{.Overall}}</title>
{{template "errors"}}<style>
{{template "css"}}</style>
</head>
<body>
<header>
{{- with .Banner}}
<div class="banner {{.Class}}"><strong>{{.Title}}:</strong> {{.Text}}{{if .Link}} (<a href="{{.Link}}">{{.Link}}</a>){{end}}</div>
{{- end}}
<h1><span class="badge {{.Class}}">{{.Overall}}</span>chaosbench report: {{.Name}}</h1>
<div class="headline">{{.Headline}}</div>
{{- if .Reasons}}
<ul class="findings reasons">
{{- range .Reasons}}
<li class="{{reasonclass .Key}}"><span class="topic">{{.Key}}</span>{{.Value}}</li>
{{- end}}
</ul>
{{- end}}
<div class="cards">
{{- range .Verdicts}}
<div class="card {{.Class}}{{if .Informational}} informational{{end}}"><div class="area">{{.Area}}{{if .Informational}} · informational{{end}}</div><div class="verdict">{{.Verdict}}</div><div class="detail">{{.Detail}}</div></div>
{{- end}}
</div>
</header>
<nav>
{{if .Crashes}}<a href="#crashes">Crashed members</a>{{end}}{{if .Known}}<a href="#known-issues">Known issues</a>{{end}}<a href="#diagnosis">Diagnosis</a>{{if .Thresholds}}<a href="#thresholds">Thresholds</a>{{end}}<a href="#latency">Latency</a><a href="#throughput">Throughput</a><a href="#operations">Operations</a>{{if .Kube}}<a href="#kubernetes">Kubernetes</a>{{end}}{{if .Gaps}}<a href="#availability">Availability</a>{{end}}{{if .Checks}}<a href="#consistency">Consistency</a>{{end}}{{if .Members}}<a href="#etcd">etcd metrics</a>{{end}}<a href="#environment">Environment</a>
</nav>
<main>
{{- if .Crashes}}
<h2 id="crashes">Crashed members</h2>
{{- range .Crashes}}
<p class="crash">{{.Title}}. Last lines of its log (<code>{{.Log}}</code>):</p>
<pre class="log">{{range .Tail}}{{.}}
{{end}}</pre>
{{- end}}
{{- end}}
{{- if .Known}}
<h2 id="known-issues">Known issues</h2>
<table><tr><th>issue</th><th>check</th><th>finding</th><th>evidence</th><th>outcome</th></tr>
{{- range .Known}}
<tr><td class="l">{{.Issue}}{{if .Title}} ({{.Title}}){{end}}</td><td class="l">{{.Check}}</td><td class="wrap">{{.Finding}}{{if gt .Count 1}} ({{.Count}} findings){{end}}</td><td class="wrap">{{.Evidence}}</td><td class="{{.Class}}">{{.Effect}}</td></tr>
{{- end}}
</table>
{{- end}}
<h2 id="diagnosis">Diagnosis</h2>
{{- if .Diagnosis}}
<ul class="findings">
{{- range .Diagnosis}}
<li class="{{sevclass .Severity}}"><span class="topic">{{.Topic}}</span>{{.Message}}</li>
{{- end}}
</ul>
{{- else}}<p class="note">Nothing to report.</p>{{end}}

{{- if .Thresholds}}
<h2 id="thresholds">Thresholds</h2>
<table><tr><th>threshold</th><th>set</th><th>observed</th><th>of</th><th>verdict</th><th>detail</th></tr>
{{- range .Thresholds}}
<tr><td><code>{{.Expr}}</code></td><td class="l">{{.Origin}}</td><td>{{.Observed}}</td><td class="l">{{.Subject}}</td><td class="{{vclass .Verdict}}">{{.Verdict}}</td><td class="wrap">{{.Detail}}</td></tr>
{{- end}}
</table>
{{- end}}

<h2 id="latency">Latency</h2>
<p class="note">Response time counts from the moment the schedule wanted a request sent (so a stalled cluster shows the wait its users would see); service time from the actual send. Shaded: fault windows.</p>
<div class="charts">
{{- if .Distribution}}<figure>{{.Distribution}}</figure>{{end}}
{{- range .LatencyCharts}}<figure>{{.}}</figure>{{end}}
</div>
{{- if .MoreOps}}<p class="note">{{.MoreOps}} more operations are in the tables below.</p>{{end}}

<h2 id="throughput">Throughput</h2>
<div class="charts">
{{- if .Throughput}}<figure>{{.Throughput}}</figure>{{else}}<p class="note">No time series.</p>{{end}}
{{- if .ErrorsChart}}<figure>{{.ErrorsChart}}</figure>{{end}}
</div>

<h2 id="operations">Operations</h2>
<table><tr><th>operation</th><th>count</th><th>ops/s</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th><th>errors</th></tr>
{{- range .Ops}}
<tr><td>{{.Name}}</td><td>{{.Count}}</td><td>{{.Throughput}}</td><td>{{.P50}}</td><td>{{.P90}}</td><td class="{{.P99Class}}">{{.P99}}</td><td>{{.P999}}</td><td>{{.Max}}</td><td class="wrap">{{.Errors}}</td></tr>
{{- end}}
{{- if gt (len .Ops) 1}}<tr><th>total</th><th>{{.Totals.Count}}</th><th>{{.Totals.Throughput}}</th><th></th><th></th><th></th><th></th><th></th><th>{{.Totals.Errors}}</th></tr>{{end}}
</table>
{{- if .ServiceOps}}
<p class="note">Service time (from the actual send):</p>
<table><tr><th>operation</th><th>count</th><th>ops/s</th><th>p50</th><th>p90</th><th>p99</th><th>p99.9</th><th>max</th></tr>
{{- range .ServiceOps}}
<tr><td>{{.Name}}</td><td>{{.Count}}</td><td>{{.Throughput}}</td><td>{{.P50}}</td><td>{{.P90}}</td><td>{{.P99}}</td><td>{{.P999}}</td><td>{{.Max}}</td></tr>
{{- end}}
</table>
{{- end}}

{{- with .Kube}}
<h2 id="kubernetes">Kubernetes</h2>
<p class="note">{{.Cluster}}. The SLOs of Kubernetes API calls applied to the etcd requests behind them, on response time p99 over the run: {{.Verdict}} ({{if .Judged}}judged by the k8s-slo thresholds{{else}}informational; --threshold k8s-slo makes them decide the outcome{{end}}).</p>
<table><tr><th>class</th><th>operation</th><th>count</th><th>p99</th><th>limit</th><th>p99 against the limit</th></tr>
{{- range .SLO}}
<tr><td class="l">{{.Class}}</td><td>{{.Op}}</td><td>{{.Count}}</td><td>{{.P99}}</td><td>{{.Limit}}</td><td class="{{.VClass}}">{{.Verdict}}</td></tr>
{{- end}}
</table>
<p class="note">Operation mix against the plan ({{.Counters}}):</p>
<table><tr><th>operation</th><th>actors</th><th>planned/s</th><th>measured/s</th><th>difference</th><th>conflicts</th></tr>
{{- range .Mix}}
<tr><td>{{.Op}}</td><td class="l">{{.Actors}}</td><td>{{.Planned}}</td><td>{{.Measured}}</td><td>{{.Diff}}</td><td>{{.Conflicts}}</td></tr>
{{- end}}
</table>
{{- end}}

{{- if .Gaps}}
<h2 id="availability">Availability</h2>
<table><tr><th>fault</th><th>window</th><th>write gap</th><th>read gap</th><th>recovered</th><th>requests</th><th>errors</th><th>outcome</th>{{range .GapColumns}}<th>{{.}}</th>{{end}}</tr>
{{- range .Gaps}}
<tr><td>{{.Fault}}</td><td>{{.Window}}</td><td class="{{.Class}}">{{.Gap}}</td><td>{{.ReadGap}}</td><td>{{.Recovered}}</td><td>{{.Requests}}</td><td>{{.Errors}}</td><td class="l">{{.Outcome}}</td>{{range .Extra}}<td class="wrap">{{.}}</td>{{end}}</tr>
{{- end}}
</table>
<p class="note">{{.GapNote}}</p>
{{- end}}

{{- if .Checks}}
<h2 id="consistency">Consistency checks</h2>
<table><tr><th>check</th><th>verdict</th><th>detail</th><th>seconds</th></tr>
{{- range .Checks}}
<tr><td>{{.Name}}</td><td class="{{checkclass .Verdict}}">{{.Verdict}}</td><td class="wrap">{{.Detail}}</td><td>{{printf "%.1f" .Seconds}}</td></tr>
{{- end}}
</table>
{{- end}}

{{- if .Members}}
<h2 id="etcd">etcd metrics</h2>
<p class="note">Scraped from every member's /metrics during the run; figures cover the measured window, p99 interpolated within Prometheus buckets. etcd's guidance: WAL fsync p99 &lt; 10ms, backend commit p99 &lt; 25ms.</p>
<table><tr><th>member</th><th>role</th><th>WAL fsync p99</th><th>commit p99</th><th>apply p99</th><th>peer RTT p99</th><th>leader changes</th><th>failed proposals</th><th>pending max</th><th>db size</th><th>CPU</th><th>RSS max</th><th>scrapes</th></tr>
{{- range .Members}}
<tr><td>{{.Name}}</td><td class="l">{{.Role}}</td><td class="{{.FsyncClass}}">{{.Fsync}}</td><td class="{{.CommitClass}}">{{.Commit}}</td><td>{{.Apply}}</td><td>{{.RTT}}</td><td>{{.LeaderChanges}}</td><td>{{.ProposalsFailed}}</td><td>{{.Pending}}</td><td>{{.DB}}</td><td>{{.CPU}}</td><td>{{.RSS}}</td><td>{{.Scrapes}}</td></tr>
{{- end}}
{{- with .Cluster}}
<tr><th>{{.Name}}</th><th></th><th class="{{.FsyncClass}}">{{.Fsync}}</th><th class="{{.CommitClass}}">{{.Commit}}</th><th>{{.Apply}}</th><th>{{.RTT}}</th><th>{{.LeaderChanges}}</th><th>{{.ProposalsFailed}}</th><th>{{.Pending}}</th><th>{{.DB}}</th><th></th><th></th><th></th></tr>
{{- end}}
</table>
{{- if .Generator}}
<table>{{range .Generator}}<tr><td>{{.Key}}</td><td class="l">{{.Value}}</td></tr>{{end}}</table>
{{- end}}
<div class="charts small">
{{- range .ServerCharts}}<figure>{{.}}</figure>{{end}}
</div>
{{- end}}

{{- range .Extra}}
<h2>{{.Title}}</h2>
{{- if .Columns}}
<table><tr>{{range .Columns}}<th>{{.}}</th>{{end}}</tr>
{{- range .Rows}}<tr>{{range .}}<td class="wrap">{{.}}</td>{{end}}</tr>{{end}}
</table>
{{- else if .Pairs}}
<table>{{range .Pairs}}<tr><td>{{.Key}}</td><td class="wrap">{{.Value}}</td></tr>{{end}}</table>
{{- else}}<p>{{.Value}}</p>{{end}}
{{- end}}

<h2 id="environment">Environment and configuration</h2>
<table>
{{- range .Env}}
<tr><td>{{.Key}}</td><td class="wrap">{{if eq .Key "command"}}<code>{{.Value}}</code>{{else}}{{.Value}}{{end}}</td></tr>
{{- end}}
</table>
{{- if .Config}}
<details><summary>Every setting of the run</summary>
<table>{{range .Config}}<tr><td><code>{{.Key}}</code></td><td class="wrap">{{.Value}}</td></tr>{{end}}</table>
</details>
{{- end}}
{{- if .Warnings}}
<p class="note">Files that could not be read:</p><ul>{{range .Warnings}}<li>{{.}}</li>{{end}}</ul>
{{- end}}
</main>
{{template "script"}}
</body>
</html>
`

const scriptTemplate = `{{define "script"}}<script>
(function () {
  var charts = document.querySelectorAll("svg.chart"), drawn = 0;
  for (var i = 0; i < charts.length; i++) {
    var r = charts[i].getBoundingClientRect();
    if (r.width > 0 && r.height > 0 && charts[i].querySelector("path")) { drawn++; }
  }
  document.documentElement.setAttribute("data-charts", String(charts.length));
  document.documentElement.setAttribute("data-charts-drawn", String(drawn));
  document.documentElement.setAttribute("data-rendered", "true");
})();
</script>
{{end}}`
