package linearizability

// The catalog of known upstream issues (knownissues.yaml) and how a finding is judged against an entry:
// from the attempts the history recorded of the operation the finding names, and the release the run
// used. The catalog is data; what each kind of evidence means is here.

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/history"
)

//go:embed knownissues.yaml
var catalogYAML []byte

// Catalog is the list of known upstream issues a check can attribute findings to.
type Catalog struct {
	Issues []KnownIssue
}

// KnownIssue is one entry of the catalog: an upstream issue, what it looks like in a run's checks, the
// evidence the history must show for a finding to be attributed to it, and the releases it affects (the
// fields are described in knownissues.yaml).
type KnownIssue struct {
	Issue     string   `yaml:"issue"`
	Title     string   `yaml:"title"`
	URL       string   `yaml:"url"`
	Check     string   `yaml:"check"`
	Finding   string   `yaml:"finding"`
	Also      []string `yaml:"also"`
	Evidence  Evidence `yaml:"evidence"`
	Component string   `yaml:"component"`
	Affected  string   `yaml:"affected"`
	Fixed     string   `yaml:"fixed"`
	Status    string   `yaml:"status"`
}

// Evidence is what the operation a finding names must show for the finding to be attributed.
type Evidence struct {
	// Sends: the operation reached etcd at least this many times (history.Sends).
	Sends int `yaml:"sends"`
	// FirstFailedWith: its first send ended with one of these gRPC codes.
	FirstFailedWith []string `yaml:"first-failed-with"`
}

// DefaultCatalog returns the catalog built into chaosbench (knownissues.yaml).
func DefaultCatalog() (*Catalog, error) {
	return ParseCatalog(catalogYAML)
}

// ParseCatalog reads a catalog in the form of knownissues.yaml. Unknown fields, entries without an issue,
// a check, a finding or evidence, and versions that do not read as releases are errors: an entry that
// asks for no evidence would attribute findings on a sentence.
func ParseCatalog(data []byte) (*Catalog, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var c Catalog
	if err := dec.Decode(&c.Issues); err != nil {
		return nil, fmt.Errorf("known-issue catalog: %w", err)
	}
	for i, e := range c.Issues {
		if err := e.validate(); err != nil {
			return nil, fmt.Errorf("known-issue catalog: entry %d (%s): %w", i+1, e.Issue, err)
		}
	}
	return &c, nil
}

func (e *KnownIssue) validate() error {
	switch {
	case e.Issue == "" || e.Check == "" || e.Finding == "":
		return errors.New("needs issue, check and finding")
	case !slices.Contains([]string{CheckLinearizability, CheckWatch, CheckSerializable}, e.Check):
		return fmt.Errorf("check %q is not one of the history's checks", e.Check)
	case e.Evidence.Sends < 1 && len(e.Evidence.FirstFailedWith) == 0:
		return errors.New("asks for no evidence")
	case e.Component != "client" && e.Component != "server":
		return fmt.Errorf("component %q: client or server", e.Component)
	}
	for _, v := range []string{e.Affected, e.Fixed} {
		if _, ok := parseRelease(v); v != "" && !ok {
			return fmt.Errorf("release %q: expected major.minor.patch", v)
		}
	}
	return nil
}

// explains reports whether a finding of kind kind, in check, is one the entry looks at.
func (e *KnownIssue) explains(check, kind string) bool {
	return e.Check == check && e.Finding == kind
}

// isAlso reports whether a finding of kind kind, in check, is the entry's anomaly seen another way.
func (e *KnownIssue) isAlso(check, kind string) bool {
	return e.Check == check && slices.Contains(e.Also, kind)
}

// judgement is what an entry makes of one finding: attributed, with the evidence that proves it, or not,
// with why.
type judgement struct {
	attributed bool
	evidence   string // the attempts of the operation, as a reader checks them
	why        string // when not attributed: why, for the violation's message
}

// judge decides whether the finding v, whose first operation is op (numbered i in the history), is the
// entry's issue, on a run whose releases are vers.
func (e *KnownIssue) judge(i int, op *history.Operation, vers results.Versions) judgement {
	if !op.AttemptsRecorded {
		return judgement{why: fmt.Sprintf("not attributed to %s: the history holds no record of op %d's attempts on the wire "+
			"(recorded before chaosbench recorded them, or over a connection it did not watch), which is the evidence %s needs", e.Issue, i, e.Issue)}
	}
	j := judgement{evidence: describeAttempts(i, op)}
	sends := history.Sends(op.Attempts)
	if len(op.Attempts) == 0 {
		sends = 1 // recorded: it went out once and was answered
	}
	if sends < e.Evidence.Sends {
		j.why = fmt.Sprintf("not %s, which needs the request sent %d times: %s", e.Issue, e.Evidence.Sends, j.evidence)
		if sends == 1 {
			j.why = fmt.Sprintf("the recorded attempts show a single send, so etcd itself applied a request it received once more than once (not %s, which needs the request sent again): %s",
				e.Issue, j.evidence)
		}
		return j
	}
	if codes := e.Evidence.FirstFailedWith; len(codes) > 0 {
		first := firstSend(op.Attempts)
		if first == nil || !slices.Contains(codes, first.Code) {
			code := "an answer"
			if first != nil && first.Code != "" {
				code = first.Code
			}
			j.why = fmt.Sprintf("not attributed to %s, which needs the first send to fail with %s: it ended with %s: %s",
				e.Issue, strings.Join(codes, " or "), code, j.evidence)
			return j
		}
	}
	return e.judgeRelease(j, vers)
}

// judgeRelease attributes a finding whose evidence matched, unless the run's release is one the entry does
// not affect: before Affected it cannot be this issue; at or after Fixed it is a regression.
func (e *KnownIssue) judgeRelease(j judgement, vers results.Versions) judgement {
	version := vers.EtcdClient
	if e.Component == "server" {
		version = vers.EtcdServer
	}
	rel, known := parseRelease(version)
	if !known {
		j.attributed = true
		j.evidence += fmt.Sprintf("; the etcd %s release is not recorded, so whether %s is fixed in it is not known", e.Component, e.Issue)
		return j
	}
	if fixed, ok := parseRelease(e.Fixed); ok && compareReleases(rel, fixed) >= 0 {
		j.why = fmt.Sprintf("regression of %s, fixed in etcd %s %s, seen with etcd %s %s: %s", e.Issue, e.Component, e.Fixed, e.Component, version, j.evidence)
		return j
	}
	if first, ok := parseRelease(e.Affected); ok && compareReleases(rel, first) < 0 {
		j.why = fmt.Sprintf("not attributed to %s, which affects etcd %s %s and later, not %s: %s", e.Issue, e.Component, e.Affected, version, j.evidence)
		return j
	}
	j.attributed = true
	return j
}

// firstSend returns the first attempt that may have reached etcd (see history.Sends), or nil.
func firstSend(as []history.Attempt) *history.Attempt {
	for i := range as {
		if !as[i].NotSent && (i+1 >= len(as) || !as[i+1].Transparent) {
			return &as[i]
		}
	}
	return nil
}

// describeAttempts says what the history recorded of op's attempts, for a reader to check: each with its
// times (seconds from the run's time base), member, and how it ended.
func describeAttempts(i int, op *history.Operation) string {
	if len(op.Attempts) == 0 {
		return fmt.Sprintf("op %d (sent at %.3fs) went out once and was answered at %.3fs", i, secs(op.Call), secs(op.Return))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "op %d made %d attempts (%d sends):", i, len(op.Attempts), history.Sends(op.Attempts))
	for k, a := range op.Attempts {
		if k > 0 {
			b.WriteString(";")
		}
		fmt.Fprintf(&b, " #%d %.3f-%.3fs", k+1, secs(a.Start), secs(a.End))
		if a.Peer != "" {
			b.WriteString(" to " + a.Peer)
		}
		switch {
		case a.NotSent:
			b.WriteString(" not sent")
		case a.Transparent:
			b.WriteString(" (gRPC's transparent retry)")
		}
		if a.Failed() {
			fmt.Fprintf(&b, " failed %s (%s)", a.Code, shorten(a.Error, 80))
		} else {
			b.WriteString(" answered")
		}
	}
	return b.String()
}

func secs(ns int64) float64 { return float64(ns) / 1e9 }

// release is a version as major, minor, patch, and whether it is a pre-release (which comes before the
// release of the same numbers).
type release struct {
	n   [3]int
	pre bool
}

// parseRelease reads "3.6.16", "v3.6.16" or "3.7.0-rc.0"; ok is false for anything else (an empty or
// "unknown" version).
func parseRelease(s string) (release, bool) {
	s = strings.TrimPrefix(strings.TrimSpace(s), "v")
	var r release
	if i := strings.IndexAny(s, "-+"); i >= 0 {
		r.pre = s[i] == '-'
		s = s[:i]
	}
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return release{}, false
	}
	for k, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return release{}, false
		}
		r.n[k] = n
	}
	return r, true
}

func compareReleases(a, b release) int {
	if c := slices.Compare(a.n[:], b.n[:]); c != 0 {
		return c
	}
	switch {
	case a.pre == b.pre:
		return 0
	case a.pre:
		return -1
	}
	return 1
}
