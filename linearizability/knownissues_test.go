package linearizability

import (
	"strings"
	"testing"

	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// TestCatalog: the catalog built in reads, names etcd-io/etcd#18424 with the evidence its mechanism needs,
// and a catalog entry that asks for no evidence, or says what the checker cannot read, is refused.
func TestCatalog(t *testing.T) {
	cat, err := DefaultCatalog()
	if err != nil {
		t.Fatal(err)
	}
	e := cat.entry(CheckLinearizability, "request applied twice")
	if e == nil || e.Issue != "etcd-io/etcd#18424" {
		t.Fatalf("no entry for a request applied twice: %+v", cat.Issues)
	}
	if e.Evidence.Sends != 2 || strings.Join(e.Evidence.FirstFailedWith, ",") != "DeadlineExceeded,Canceled" || e.Component != "client" || e.Fixed != "" {
		t.Errorf("etcd-io/etcd#18424: %+v", e)
	}
	for name, tc := range map[string]struct{ yaml, want string }{
		"no evidence":     {"- {issue: x#1, check: linearizability, finding: f, component: client}", "asks for no evidence"},
		"unknown field":   {"- {issue: x#1, check: linearizability, finding: f, component: client, evidence: {sends: 2}, fixd: 3.6.0}", "field fixd not found"},
		"unknown check":   {"- {issue: x#1, check: linearisability, finding: f, component: client, evidence: {sends: 2}}", `check "linearisability"`},
		"component":       {"- {issue: x#1, check: watch, finding: f, component: kernel, evidence: {sends: 2}}", `component "kernel"`},
		"release":         {"- {issue: x#1, check: watch, finding: f, component: server, evidence: {sends: 2}, fixed: soon}", `release "soon"`},
		"no finding":      {"- {issue: x#1, check: watch, component: server, evidence: {sends: 2}}", "needs issue, check and finding"},
		"evidence fields": {"- {issue: x#1, check: watch, finding: f, component: server, evidence: {sent: 2}}", "field sent not found"},
	} {
		if _, err := ParseCatalog([]byte(tc.yaml)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, tc.want)
		}
	}
}

// TestKnownIssueEvidence holds the attribution to its evidence: a request applied twice is etcd-io/etcd#18424
// only when the history recorded it sent twice with its first send failing with a context error, on a
// client release the issue affects and has not been fixed in. Every other case must stay a violation, and
// say why: the cases below fail if the judgement gives way on any part of the evidence.
func TestKnownIssueEvidence(t *testing.T) {
	cat, err := DefaultCatalog()
	if err != nil {
		t.Fatal(err)
	}
	issue := *cat.entry(CheckLinearizability, "request applied twice")
	fixedIn := func(component, release string) KnownIssue {
		e := issue
		e.Component, e.Fixed = component, release
		return e
	}
	const s = int64(1e9)
	sent := func(start, end int64, code string) history.Attempt {
		return history.Attempt{Start: start * s / 10, End: end * s / 10, Code: code, Peer: "127.0.0.1:2379"}
	}
	retried := []history.Attempt{sent(10, 80, "DeadlineExceeded"), sent(81, 82, "")}
	v36 := results.Versions{EtcdClient: "3.6.16", EtcdServer: "3.6.16"}
	for _, tc := range []struct {
		name     string
		entry    KnownIssue
		recorded bool
		attempts []history.Attempt
		vers     results.Versions
		want     string // "" when attributed, else a part of why
	}{
		{"sent again after DeadlineExceeded", issue, true, retried, v36, ""},
		{"sent again after Canceled", issue, true, []history.Attempt{sent(10, 30, "Canceled"), sent(31, 32, "")}, v36, ""},
		{"three sends", issue, true, []history.Attempt{sent(10, 80, "DeadlineExceeded"), sent(80, 90, "DeadlineExceeded"), sent(90, 91, "")}, v36, ""},
		{"release not recorded", issue, true, retried, results.Versions{}, ""},
		{"pre-release before the fix", fixedIn("client", "3.7.0"), true, retried, results.Versions{EtcdClient: "3.7.0-rc.0"}, ""},
		{"attempts not recorded", issue, false, nil, v36, "no record of op 7's attempts"},
		{"sent once and answered", issue, true, nil, v36, "the recorded attempts show a single send"},
		{"sent once, failed", issue, true, []history.Attempt{sent(10, 80, "DeadlineExceeded")}, v36, "single send"},
		{"first attempt never sent", issue, true, []history.Attempt{{Start: s, End: s, Code: "Unavailable", NotSent: true}, sent(11, 12, "")}, v36, "single send"},
		{"transparent retry", issue, true, []history.Attempt{sent(10, 11, "Unavailable"), {Start: 11 * s / 10, End: 12 * s / 10, Transparent: true}}, v36, "single send"},
		{"first send failed with Unavailable", issue, true, []history.Attempt{sent(10, 80, "Unavailable"), sent(81, 82, "")}, v36,
			"needs the first send to fail with DeadlineExceeded or Canceled: it ended with Unavailable"},
		{"first send answered", issue, true, []history.Attempt{sent(10, 11, ""), sent(11, 12, "")}, v36, "it ended with an answer"},
		{"client release marked fixed", fixedIn("client", "3.6.0"), true, retried, v36,
			"regression of etcd-io/etcd#18424, fixed in etcd client 3.6.0, seen with etcd client 3.6.16"},
		{"server release marked fixed", fixedIn("server", "3.6.0"), true, retried, v36,
			"regression of etcd-io/etcd#18424, fixed in etcd server 3.6.0, seen with etcd server 3.6.16"},
		{"fixed in the release itself", fixedIn("client", "3.6.16"), true, retried, results.Versions{EtcdClient: "v3.6.16"}, "regression"},
		{"release before the issue", issue, true, retried, results.Versions{EtcdClient: "3.3.9"}, "affects etcd client 3.4.0 and later, not 3.3.9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			op := &history.Operation{Call: s, Return: 9 * s, AttemptsRecorded: tc.recorded, Attempts: tc.attempts,
				Response: &history.Response{Revision: 10}}
			j := tc.entry.judge(7, op, tc.vers)
			switch {
			case tc.want == "" && !j.attributed:
				t.Fatalf("not attributed: %s", j.why)
			case tc.want != "" && j.attributed:
				t.Fatalf("attributed on %s, want a violation with %q", j.evidence, tc.want)
			case tc.want != "" && !strings.Contains(j.why, tc.want):
				t.Fatalf("why: %s\nwant %q in it", j.why, tc.want)
			}
			if tc.recorded && !strings.Contains(j.evidence, "op 7") {
				t.Errorf("evidence does not name the operation: %s", j.evidence)
			}
			t.Logf("attributed %v: %s%s", j.attributed, j.evidence, j.why)
		})
	}
}

// TestDescribeAttempts: the evidence says, for a reader to check in the history, each attempt's times,
// member and end.
func TestDescribeAttempts(t *testing.T) {
	op := &history.Operation{Call: 43_700_000_000, Return: 50_800_000_000, AttemptsRecorded: true, Attempts: []history.Attempt{
		{Start: 43_700_000_000, End: 50_703_000_000, Code: "DeadlineExceeded", Error: "context deadline exceeded", Peer: "127.0.0.1:43539"},
		{Start: 50_704_000_000, End: 50_708_000_000, Peer: "127.0.0.1:37317"},
	}}
	want := "op 4299 made 2 attempts (2 sends): #1 43.700-50.703s to 127.0.0.1:43539 failed DeadlineExceeded (context deadline exceeded);" +
		" #2 50.704-50.708s to 127.0.0.1:37317 answered"
	if got := describeAttempts(4299, op); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
