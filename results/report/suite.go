package report

import (
	"bytes"
	"cmp"
	"encoding/xml"
	"errors"
	"fmt"
	"html/template"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// Files a suite writes into its directory, beside one run directory per scenario.
const (
	SuiteMarkdownFile = "suite.md"
	SuiteHTMLFile     = "suite.html"
)

// WriteSuite writes the suite's junit.xml, suite.md and suite.html into dir, reading each scenario's run
// summary from its run directory.
func WriteSuite(dir string, s *results.Suite) error {
	return errors.Join(
		writeFile(filepath.Join(dir, JUnitFile), func(w io.Writer) error { return WriteSuiteJUnit(w, dir, s) }),
		writeFile(filepath.Join(dir, SuiteMarkdownFile), func(w io.Writer) error { return WriteSuiteMarkdown(w, s) }),
		writeFile(filepath.Join(dir, SuiteHTMLFile), func(w io.Writer) error { return WriteSuiteHTML(w, s) }),
	)
}

// WriteSuiteJUnit writes the suite as JUnit XML: one testsuite per scenario, exactly as its run's junit.xml
// has it (a test case for the run's outcome, one per check and one per threshold), plus a skipped test case
// for each attempt that was retried, so that a retry is never hidden behind a green scenario.
//
// The scenario's testsuite is taken from WriteJUnit's own output rather than built a second time, so that a
// run's junit.xml and its part of the suite's cannot disagree.
func WriteSuiteJUnit(w io.Writer, dir string, s *results.Suite) error {
	doc := junitSuites{Name: "chaosbench.suite"}
	for _, sc := range s.Scenarios {
		suite, err := scenarioJUnit(dir, sc)
		if err != nil {
			return fmt.Errorf("scenario %s: %w", sc.Name, err)
		}
		if len(sc.Expect) > 0 {
			expected(&suite, sc)
		}
		suite.Properties = append(suite.Properties,
			junitProperty{"scenario_file", sc.File},
			junitProperty{"attempts", strconv.Itoa(len(sc.Attempts))},
			junitProperty{"replay", sc.Replay})
		for i, a := range sc.Attempts[:max(len(sc.Attempts)-1, 0)] {
			o := outcome.Outcome{Kind: a.Outcome, Reasons: a.Reasons}
			suite.Cases = append(suite.Cases, junitCase{
				Classname: "chaosbench.retry", Name: fmt.Sprintf("attempt %d of %d", i+1, len(sc.Attempts)),
				Time: fmt.Sprintf("%.3f", a.DurationSeconds),
				Skipped: &junitMessage{Message: fmt.Sprintf("retried once after a harness error (--retry-harness): %s", o),
					Text: fmt.Sprintf("run directory: %s", a.Dir)},
			})
		}
		countCases(&suite)
		doc.Suites = append(doc.Suites, suite)
		doc.Tests += suite.Tests
		doc.Failures += suite.Failures
		doc.Errors += suite.Errors
	}
	return writeJUnitDoc(w, doc)
}

// scenarioJUnit is the testsuite of a scenario's last run, or, when the run left no summary (it could not
// start), a testsuite whose outcome case carries the scenario's outcome.
func scenarioJUnit(dir string, sc results.SuiteScenario) (junitSuite, error) {
	if sc.Dir != "" {
		if sum, err := results.ReadSummary(filepath.Join(dir, sc.Dir)); err == nil {
			var buf bytes.Buffer
			if err := WriteJUnit(&buf, &Run{Summary: sum, Thresholds: sum.Thresholds, Diagnosis: sum.Diagnosis}); err != nil {
				return junitSuite{}, err
			}
			var doc junitSuites
			if err := xml.Unmarshal(buf.Bytes(), &doc); err != nil {
				return junitSuite{}, fmt.Errorf("read back the run's JUnit: %w", err)
			}
			if len(doc.Suites) == 1 {
				return doc.Suites[0], nil
			}
		}
	}
	o := sc.Verdict()
	tc := junitCase{Classname: "chaosbench.run", Name: "outcome", Time: fmt.Sprintf("%.3f", sc.DurationSeconds)}
	if !o.Passed() {
		tc.Error = &junitMessage{Message: o.String(), Type: string(o.Kind), Text: strings.Join(o.Texts(), "\n")}
	}
	return junitSuite{
		Name: "chaosbench." + sc.Name, Time: tc.Time,
		Properties: []junitProperty{{"seed", strconv.FormatInt(sc.Seed, 10)}, {"outcome", string(o.Kind)}},
		Cases:      []junitCase{tc},
	}, nil
}

// expected makes the testsuite of a scenario run on the release that had its bug say the scenario's
// verdict, not its run's: when the run found the bug as expected (the verdict passed), its failed and erred
// cases pass, each finding kept in the case's output; when it did not, a case for the expected finding
// carries the verdict. The suite's JUnit then says what its exit code and suite.json say.
func expected(suite *junitSuite, sc results.SuiteScenario) {
	o := sc.Verdict()
	if !o.Passed() {
		countCases(suite)
		if suite.Failures+suite.Errors == 0 {
			suite.Cases = append(suite.Cases, junitCase{Classname: "chaosbench.suite", Name: "expected finding",
				Error: &junitMessage{Message: o.String(), Type: string(o.Kind), Text: strings.Join(o.Texts(), "\n")}})
		}
		return
	}
	for i := range suite.Cases {
		c := &suite.Cases[i]
		m := cmp.Or(c.Failure, c.Error)
		if m == nil {
			continue
		}
		c.SystemOut = strings.TrimSpace(fmt.Sprintf("expected on %s (caught as %v, %s): %s\n%s\n%s",
			sc.EtcdVersion, sc.Expect, sc.Issue, m.Message, m.Text, c.SystemOut))
		c.Failure, c.Error = nil, nil
	}
}

// countCases sets a testsuite's counts from its cases.
func countCases(s *junitSuite) {
	s.Tests, s.Failures, s.Errors, s.Skipped = 0, 0, 0, 0
	for _, c := range s.Cases {
		s.Tests++
		switch {
		case c.Failure != nil:
			s.Failures++
		case c.Error != nil:
			s.Errors++
		case c.Skipped != nil:
			s.Skipped++
		}
	}
}

// WriteSuiteMarkdown writes suite.md: the suite's verdict, one row per scenario, and for each scenario that
// did not pass its reasons and the command that replays it. It is short enough for a CI step summary.
func WriteSuiteMarkdown(w io.Writer, s *results.Suite) error {
	o := s.Verdict()
	var b strings.Builder
	fmt.Fprintf(&b, "# chaosbench suite: **%s** — outcome: %s (exit code %d)\n\n", o.Headline(), o.Kind, o.ExitCode())
	fmt.Fprintf(&b, "%s\n\n", selectionText(s))
	b.WriteString("| scenario | verdict | seed | attempts | time (s) | report |\n| --- | --- | ---: | --- | ---: | --- |\n")
	for _, sc := range s.Scenarios {
		v := sc.Verdict()
		attempts := strconv.Itoa(len(sc.Attempts))
		if sc.Retried() {
			attempts += fmt.Sprintf(" (retried: attempt 1 was %s)", sc.Attempts[0].Outcome)
		}
		link := "-"
		if sc.Dir != "" {
			link = fmt.Sprintf("[report](%s/%s)", sc.Dir, HTMLFile)
		}
		fmt.Fprintf(&b, "| %s | %s (%s) | %d | %s | %.1f | %s |\n", sc.Name, v.Headline(), v.Kind, sc.Seed, attempts, sc.DurationSeconds, link)
	}
	for _, sc := range s.Scenarios {
		if sc.Outcome == outcome.OK && !sc.Retried() {
			continue
		}
		fmt.Fprintf(&b, "\n### %s: %s\n\n", sc.Name, sc.Verdict().Headline())
		for _, r := range sc.Reasons {
			fmt.Fprintf(&b, "- %s: %s\n", r.Kind, mdEscape(r.Text))
		}
		if sc.Retried() {
			fmt.Fprintf(&b, "- retried once after a harness error (`--retry-harness`); %s\n", mdEscape(firstAttempt(sc)))
		}
		fmt.Fprintf(&b, "\nreplay: `%s`\n", sc.Replay)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// firstAttempt describes a retried scenario's first attempt.
func firstAttempt(sc results.SuiteScenario) string {
	a := sc.Attempts[0]
	where := ""
	if a.Dir != "" {
		where = " (" + a.Dir + ")"
	}
	return fmt.Sprintf("attempt 1%s: %s", where, outcome.Outcome{Kind: a.Outcome, Reasons: a.Reasons})
}

func mdEscape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

// selectionText says in one line what the suite ran.
func selectionText(s *results.Suite) string {
	sel := s.Selection
	parts := []string{fmt.Sprintf("%d of %d scenarios in %s", len(s.Scenarios), sel.Registry, strings.Join(sel.Paths, ", "))}
	if len(sel.Tags) > 0 {
		parts = append(parts, "tags "+strings.Join(sel.Tags, ","))
	}
	if len(sel.Only) > 0 {
		parts = append(parts, "only "+strings.Join(sel.Only, ","))
	}
	if sel.Shard != "" {
		parts = append(parts, "shard "+sel.Shard)
	}
	if sel.Seed != 0 {
		parts = append(parts, fmt.Sprintf("seed %d for all", sel.Seed))
	}
	if len(sel.Set) > 0 {
		parts = append(parts, "settings "+strings.Join(sel.Set, " "))
	}
	if sel.RetryHarness {
		parts = append(parts, "harness errors retried once")
	}
	return strings.Join(parts, "; ") + fmt.Sprintf("; chaosbench %s, %.0f s", s.Chaosbench, s.DurationSeconds)
}

var suiteHTML = template.Must(template.New("suite").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>chaosbench suite: {{.Headline}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 24px; color: #222; }
table { border-collapse: collapse; } th, td { border-bottom: 1px solid #ddd; padding: 4px 10px; text-align: left; vertical-align: top; }
.badge { display: inline-block; padding: 2px 10px; border-radius: 12px; color: #fff; font-weight: 600; font-size: 13px; margin-right: 8px; }
.badge.ok { background: #2e7d32; } .badge.fail { background: #c62828; } .badge.warn { background: #ef6c00; }
code { background: #f4f4f4; padding: 1px 4px; } .muted { color: #666; }
</style></head><body>
<h1><span class="badge {{.Class}}">{{.Headline}}</span>chaosbench suite</h1>
<p>outcome: {{.Kind}} (exit code {{.Code}})</p>
<p class="muted">{{.Selection}}</p>
{{if .Reasons}}<ul>{{range .Reasons}}<li>{{.}}</li>{{end}}</ul>{{end}}
<table><tr><th>scenario</th><th>verdict</th><th>seed</th><th>attempts</th><th>time (s)</th><th>reasons</th></tr>
{{range .Rows}}<tr><td>{{if .Link}}<a href="{{.Link}}">{{.Name}}</a>{{else}}{{.Name}}{{end}}<br><span class="muted">{{.File}}</span></td>
<td><span class="badge {{.Class}}">{{.Headline}}</span>{{.Kind}}</td><td>{{.Seed}}</td><td>{{.Attempts}}</td><td>{{printf "%.1f" .Seconds}}</td>
<td>{{range .Reasons}}{{.}}<br>{{end}}{{if .Failed}}replay: <code>{{.Replay}}</code>{{end}}</td></tr>
{{end}}</table>
</body></html>
`))

type suiteRow struct {
	Name, File, Link, Class, Headline, Kind, Attempts, Replay string
	Seed                                                      int64
	Seconds                                                   float64
	Reasons                                                   []string
	Failed                                                    bool
}

// WriteSuiteHTML writes suite.html: the suite's verdict and one row per scenario, linking its report.html.
func WriteSuiteHTML(w io.Writer, s *results.Suite) error {
	o := s.Verdict()
	data := struct {
		Headline, Class, Kind, Selection string
		Code                             int
		Reasons                          []string
		Rows                             []suiteRow
	}{o.Headline(), o.Class(), string(o.Kind), selectionText(s), o.ExitCode(), o.Texts(), nil}
	for _, sc := range s.Scenarios {
		v := sc.Verdict()
		row := suiteRow{Name: sc.Name, File: sc.File, Class: v.Class(), Headline: v.Headline(), Kind: string(v.Kind),
			Attempts: strconv.Itoa(len(sc.Attempts)), Replay: sc.Replay, Seed: sc.Seed, Seconds: sc.DurationSeconds,
			Reasons: v.Texts(), Failed: !v.Passed()}
		if sc.Dir != "" {
			row.Link = sc.Dir + "/" + HTMLFile
		}
		if sc.Retried() {
			row.Attempts += " (retried)"
			row.Reasons = append(row.Reasons, "retried once after a harness error; "+firstAttempt(sc))
		}
		data.Rows = append(data.Rows, row)
	}
	return suiteHTML.Execute(w, data)
}
