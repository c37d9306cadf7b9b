package report

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
)

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Timestamp  string          `xml:"timestamp,attr,omitempty"`
	Properties []junitProperty `xml:"properties>property"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Classname string        `xml:"classname,attr"`
	Name      string        `xml:"name,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Error     *junitMessage `xml:"error,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
	SystemOut string        `xml:"system-out,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Text    string `xml:",chardata"`
}

// WriteJUnit writes a JUnit XML report: one test case for the run itself (its outcome, with the last log
// lines of every member that crashed), one per consistency check, one per known-issue finding and one per
// threshold, so that CI systems show each verdict as a test. A check that could not decide is an error, not
// a pass; a threshold that did not apply is skipped.
func WriteJUnit(w io.Writer, r *Run) error {
	s := r.Summary
	suite := junitSuite{Name: "chaosbench." + s.Name, Time: fmt.Sprintf("%.3f", s.DurationSeconds)}
	if !s.Start.IsZero() {
		suite.Timestamp = s.Start.UTC().Format("2006-01-02T15:04:05")
	}
	suite.Properties = []junitProperty{
		{"seed", strconv.FormatInt(s.Seed, 10)},
		{"chaosbench", s.Versions.Chaosbench},
		{"etcd_server", s.Versions.EtcdServer},
		{"throughput", fmt.Sprintf("%.1f", s.Total.Throughput)},
	}
	// The first test case is the run's outcome, the value the exit code and every headline come from: it
	// fails (a violation, a failed threshold, an interrupted run) or errs (a harness error, an undecided
	// check) exactly when the run did not pass, with every reason in its text.
	o := s.Verdict()
	suite.Properties = append(suite.Properties, junitProperty{"outcome", string(o.Kind)})
	run := junitCase{Classname: "chaosbench.run", Name: "outcome", Time: suite.Time}
	if !o.Passed() {
		msg := &junitMessage{Message: o.String(), Type: string(o.Kind), Text: strings.Join(o.Texts(), "\n") + crashText(s.Crashes)}
		switch o.Kind {
		case outcome.HarnessError, outcome.Undecided:
			run.Error = msg
		default:
			run.Failure = msg
		}
	}
	var out strings.Builder
	for _, f := range r.Diagnosis {
		fmt.Fprintf(&out, "%s (%s): %s\n", f.Severity, f.Topic, f.Message)
	}
	if o.Passed() {
		for _, rs := range o.Reasons {
			fmt.Fprintf(&out, "%s: %s\n", rs.Kind, rs.Text)
		}
	}
	run.SystemOut = out.String()
	suite.Cases = append(suite.Cases, run)
	for _, c := range s.Checks {
		tc := junitCase{Classname: "chaosbench.checks", Name: c.Name, Time: fmt.Sprintf("%.3f", c.Seconds)}
		switch c.Verdict {
		case results.VerdictOK:
		case results.VerdictNothing:
			tc.Skipped = &junitMessage{Message: results.VerdictNothing + ": " + c.Detail}
		case results.VerdictViolation:
			tc.Failure = &junitMessage{Message: "violation: " + c.Detail, Type: "violation", Text: c.Detail}
		case results.VerdictKnownIssue:
			knownCheck(&tc, c, s)
		default:
			tc.Error = &junitMessage{Message: c.Verdict + ": " + c.Detail, Type: c.Verdict, Text: c.Detail}
		}
		suite.Cases = append(suite.Cases, tc)
	}
	suite.Cases = append(suite.Cases, knownCases(s)...)
	for _, t := range r.Thresholds {
		name := t.Expr
		if t.Set != "" {
			name = t.Set + ": " + t.Expr
		}
		tc := junitCase{Classname: "chaosbench.thresholds", Name: name, Time: "0",
			SystemOut: strings.TrimSpace(fmt.Sprintf("observed %s %s", t.Observed, t.Subject))}
		switch t.Verdict {
		case results.ThresholdFail:
			tc.Failure = &junitMessage{Message: t.Detail, Type: "threshold", Text: t.Detail}
		case results.ThresholdNotApplicable:
			tc.Skipped = &junitMessage{Message: t.Detail}
		}
		suite.Cases = append(suite.Cases, tc)
	}
	countCases(&suite)
	doc := junitSuites{Name: "chaosbench", Tests: suite.Tests, Failures: suite.Failures, Errors: suite.Errors, Suites: []junitSuite{suite}}
	return writeJUnitDoc(w, doc)
}

// crashText is the last log lines of every member that crashed, for the outcome's test case: the panic that
// ended a member is what a CI reader needs first.
func crashText(cs []results.Crash) string {
	var b strings.Builder
	for _, c := range cs {
		fmt.Fprintf(&b, "\n\nlast lines of %s's log (%s, %s):\n", c.Member, c.Log, c.Status)
		for _, l := range c.LogTail {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// writeJUnitDoc writes a JUnit document, indented, with its XML header.
func writeJUnitDoc(w io.Writer, doc junitSuites) error {
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// perfdash is the format of Kubernetes' perfdash, as etcd's benchmark tool writes it (--report-perfdash).
type perfdash struct {
	Version   string         `json:"version"`
	DataItems []perfdashItem `json:"dataItems"`
}

type perfdashItem struct {
	Data   map[string]float64 `json:"data"`
	Unit   string             `json:"unit"`
	Labels map[string]string  `json:"labels"`
}

// WritePerfdash writes perfdash-compatible JSON: p50, p90 and p99 response time per operation (labelled
// like etcd's benchmark tool: Operation in upper case, and Resource for verb/resource operations), and the
// same for the worst member's WAL fsync and backend commit.
func WritePerfdash(w io.Writer, r *Run) error {
	doc := perfdash{Version: "v1"}
	item := func(l results.Latency) map[string]float64 {
		return map[string]float64{"Perc50": round4(l.P50), "Perc90": round4(l.P90), "Perc99": round4(l.P99)}
	}
	for _, name := range r.OperationNames() {
		op := r.Summary.Operations[name]
		verb, resource, _ := strings.Cut(name, "/")
		labels := map[string]string{"Operation": strings.ToUpper(verb)}
		if resource != "" {
			labels["Resource"] = resource
		}
		doc.DataItems = append(doc.DataItems, perfdashItem{Data: item(op.Response), Unit: "ms", Labels: labels})
	}
	if sv := r.Summary.Server; sv != nil {
		for _, m := range []struct {
			name string
			b    results.Bucketed
		}{{"etcd_disk_wal_fsync_duration_seconds", sv.Cluster.WALFsync}, {"etcd_disk_backend_commit_duration_seconds", sv.Cluster.BackendCommit}} {
			if m.b.Count == 0 {
				continue
			}
			doc.DataItems = append(doc.DataItems, perfdashItem{
				Data: map[string]float64{"Perc50": round4(m.b.P50), "Perc90": round4(m.b.P90), "Perc99": round4(m.b.P99)},
				Unit: "ms", Labels: map[string]string{"Metric": m.name},
			})
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(doc)
}

func round4(v float64) float64 { return math.Round(v*1e4) / 1e4 }
