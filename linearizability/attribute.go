package linearizability

// Attributing findings to known upstream issues (knownissues.go), from evidence: after the checks, each
// violation of a kind the catalog names is judged against its entry by the attempts the history recorded
// of the operation it names; a violation the evidence proves moves to the known findings, every other one
// stays a violation, its message saying why it was not attributed (no attempts recorded, a single send, a
// regression of a fixed issue). A check whose every violation moved has the verdict "known issue".

import (
	"fmt"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// known is what the attribution moved out of the violations: the findings, each with its evidence, and
// the violations they stand for (kept in the report, marked with their issue).
type known struct {
	findings   []results.KnownIssueFinding
	violations []Violation
}

// attribute judges every violation of f against cat, on a run whose releases are vers, and leaves in f only
// the violations that were not attributed.
func (c *checker) attribute(cat *Catalog, vers results.Versions, f *findings) {
	for _, list := range []*[]Violation{&f.lin, &f.watch, &f.ser} {
		*list = c.attributeList(cat, vers, *list, &f.known)
	}
}

// explainedOp is an operation a known finding explains: by the finding's issue, the finding's index.
type explainedOp struct {
	issue string
	op    int
}

// attributeList attributes the violations of one check: first the findings an entry looks at, then those
// that are the same anomaly seen another way (a failing key segment made of operations the first pass
// explained). It returns the violations that stay.
func (c *checker) attributeList(cat *Catalog, vers results.Versions, list []Violation, k *known) []Violation {
	explained := map[explainedOp]int{}
	var kept []Violation
	for _, v := range list {
		e := cat.entry(v.Check, v.Kind)
		if e == nil || len(v.Ops) == 0 {
			kept = append(kept, v)
			continue
		}
		j := e.judge(v.Ops[0], c.op(v.Ops[0]), vers)
		if !j.attributed {
			v.Message += "; " + j.why
			kept = append(kept, v)
			continue
		}
		v.Known = e.Issue
		k.violations = append(k.violations, v)
		k.findings = append(k.findings, results.KnownIssueFinding{Issue: e.Issue, Title: e.Title, Check: v.Check,
			Finding: v.String(), Evidence: j.evidence, Count: 1})
		for _, op := range v.Ops {
			explained[explainedOp{e.Issue, op}] = len(k.findings) - 1
		}
	}
	var out []Violation
	for _, v := range kept {
		if i, ok := cat.alsoExplained(v, explained); ok {
			v.Known = k.findings[i].Issue
			k.violations = append(k.violations, v)
			k.findings[i].Count++
			continue
		}
		out = append(out, v)
	}
	return out
}

// entry returns the entry that looks at findings of kind in check, or nil.
func (cat *Catalog) entry(check, kind string) *KnownIssue {
	for i := range cat.Issues {
		if cat.Issues[i].explains(check, kind) {
			return &cat.Issues[i]
		}
	}
	return nil
}

// alsoExplained returns the known finding that explains v, a finding of a kind an entry lists under also,
// when every operation v names is one that finding explains.
func (cat *Catalog) alsoExplained(v Violation, explained map[explainedOp]int) (int, bool) {
	if len(v.Ops) == 0 {
		return 0, false
	}
	for i := range cat.Issues {
		e := &cat.Issues[i]
		if !e.isAlso(v.Check, v.Kind) {
			continue
		}
		first, ok := explained[explainedOp{e.Issue, v.Ops[0]}]
		for _, op := range v.Ops[1:] {
			if j, in := explained[explainedOp{e.Issue, op}]; !in || j != first {
				ok = false
			}
		}
		if ok {
			return first, true
		}
	}
	return 0, false
}

// knownVerdict gives check the verdict "known issue" when the known findings are all it found, and names
// them after its detail when it found more (it stays a violation) or could not decide (it stays unknown).
func knownVerdict(check *results.Check, k known) {
	var mine []results.KnownIssueFinding
	for _, f := range k.findings {
		if f.Check == check.Name {
			mine = append(mine, f)
		}
	}
	if len(mine) == 0 {
		return
	}
	switch check.Verdict {
	case results.VerdictOK, results.VerdictNothing:
		check.Verdict = results.VerdictKnownIssue
		check.Detail = mine[0].Text() + moreViolations(len(mine))
	default:
		check.Detail += fmt.Sprintf("\nalso %d finding(s) attributed by their evidence to known issues, first: %s", len(mine), mine[0].Text())
	}
}
