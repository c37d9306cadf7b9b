package report

import (
	"bufio"
	"fmt"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// knownView is one finding attributed to a known upstream issue (summary.json "known_issues"): the issue,
// what was found, the evidence that proves the attribution, and what it did to the outcome.
type knownView struct {
	Issue, Title, Check, Finding, Evidence string
	Count                                  int
	// Failing says the policy (--known-issues=fail) made it a violation; Effect says so in words.
	Failing bool
	Effect  string
	Class   string
}

// known lists the run's known-issue findings as a section of their own, wherever a violation would be.
func (v *view) known(r *Run) {
	failing := outcome.KnownIssuePolicy(r.Summary.KnownIssuePolicy).Kind() == outcome.Violation
	for _, k := range r.Summary.KnownIssues {
		kv := knownView{Issue: k.Issue, Title: k.Title, Check: k.Check, Finding: k.Finding, Evidence: k.Evidence, Count: k.Count,
			Failing: failing, Effect: "reported, passes (--known-issues=report)", Class: "warn"}
		if failing {
			kv.Effect, kv.Class = "a violation by policy (--known-issues=fail)", "fail"
		}
		v.Known = append(v.Known, kv)
	}
}

// markdownKnown writes the known-issue findings, each with its evidence, under their own heading.
func markdownKnown(b *bufio.Writer, v *view) {
	if len(v.Known) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Known issues\n\n")
	table(b, []string{"issue", "check", "finding", "evidence", "outcome"}, func(row func(...string)) {
		for _, k := range v.Known {
			issue := k.Issue
			if k.Title != "" {
				issue += " (" + k.Title + ")"
			}
			finding := k.Finding
			if k.Count > 1 {
				finding = fmt.Sprintf("%s (%d findings)", finding, k.Count)
			}
			effect := k.Effect
			if k.Failing {
				effect = "**" + effect + "**"
			}
			row(issue, k.Check, finding, k.Evidence, effect)
		}
	})
}

// knownCheck is the JUnit test case of a check whose every finding is a known issue, judged as Decide
// judges it: with its findings, it passes naming them (or fails when the policy made them a violation);
// without any, it is undecided, an error.
func knownCheck(tc *junitCase, c results.Check, s *results.Summary) {
	var names []string
	for _, k := range s.KnownIssues {
		if k.Check == c.Name {
			names = append(names, k.Issue)
		}
	}
	switch {
	case len(names) == 0:
		tc.Error = &junitMessage{Message: "known issue without evidence: " + c.Detail, Type: string(outcome.Undecided), Text: c.Detail}
	case outcome.KnownIssuePolicy(s.KnownIssuePolicy).Kind() == outcome.Violation:
		tc.Failure = &junitMessage{Message: "known issue, a violation by policy (--known-issues=fail): " + strings.Join(names, ", "), Type: string(outcome.Violation), Text: knownIssuesText(s, c.Name)}
	default:
		tc.SystemOut = knownIssuesText(s, c.Name)
	}
}

// knownIssuesText is the known-issue findings of check, one per line with their evidence.
func knownIssuesText(s *results.Summary, check string) string {
	var b strings.Builder
	for _, k := range s.KnownIssues {
		if k.Check == check {
			b.WriteString(k.Text() + "\n")
		}
	}
	return b.String()
}

// knownCases are the JUnit test cases of the known-issue findings: one per finding, passing with its issue
// and evidence in system-out, or failing when the policy made it a violation (the run's outcome case fails
// then too).
func knownCases(s *results.Summary) []junitCase {
	failing := outcome.KnownIssuePolicy(s.KnownIssuePolicy).Kind() == outcome.Violation
	var out []junitCase
	for _, k := range s.KnownIssues {
		tc := junitCase{Classname: "chaosbench.known-issues", Name: k.Check + ": " + k.Issue, Time: "0"}
		// Text names the issue, the finding and its evidence.
		if failing {
			tc.Failure = &junitMessage{Message: "known issue, a violation by policy (--known-issues=fail): " + k.Issue, Type: string(outcome.Violation), Text: k.Text()}
		} else {
			tc.SystemOut = "known issue, reported (passes): " + k.Text()
		}
		out = append(out, tc)
	}
	return out
}
