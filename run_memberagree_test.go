package chaosbench

import (
	"strings"
	"testing"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// TestMembersVerdict: a disagreement after any window is a violation named first; a window that could
// not be compared is named but leaves an agreeing final comparison ok; an unknown final comparison stays
// unknown.
func TestMembersVerdict(t *testing.T) {
	check := func(verdict, detail string) results.Check {
		return results.Check{Name: CheckMembersAgree, Verdict: verdict, Detail: detail, Seconds: 0.5}
	}
	window := func(spec string, c *results.Check) results.FaultWindow {
		return results.FaultWindow{Spec: spec, Members: c}
	}
	okAfter := check(results.VerdictOK, "m1, m2 and m3 agree at revision 90")
	for _, tc := range []struct {
		name    string
		final   results.Check
		windows []results.FaultWindow
		verdict string
		lines   []string
	}{
		{"no faults", check(results.VerdictOK, "m1, m2 and m3 agree at revision 100"), nil, results.VerdictOK,
			[]string{"after the load: m1, m2 and m3 agree at revision 100"}},
		{"every window agreed", check(results.VerdictOK, "agree at 100"),
			[]results.FaultWindow{window("kill:leader@1s", &okAfter), window("partition:leader@3s", &okAfter), window("skipped", nil)},
			results.VerdictOK, []string{"after the load: agree at 100", "after each of the 2 fault windows too (under load)"}},
		{"a window disagreed", check(results.VerdictOK, "agree at 100"),
			[]results.FaultWindow{window("kill:leader@1s", &okAfter), window("partition:leader@3s", ptr(check(results.VerdictViolation, "members disagree at revision 40")))},
			results.VerdictViolation, []string{"after fault partition:leader@3s: members disagree at revision 40", "after the load: agree at 100",
				"after 1 other fault window: agree (under load)"}},
		{"a window not compared", check(results.VerdictOK, "agree at 100"),
			[]results.FaultWindow{window("kill:leader@1s", ptr(check(results.VerdictUnknown, "members not compared: cut short")))},
			results.VerdictOK, []string{"after the load: agree at 100", "after fault kill:leader@1s: members not compared: cut short"}},
		{"the final comparison disagreed", check(results.VerdictViolation, "members disagree at revision 100"), nil,
			results.VerdictViolation, []string{"after the load: members disagree at revision 100"}},
		{"the final comparison was not possible", check(results.VerdictUnknown, "members not compared: m2: not running"),
			[]results.FaultWindow{window("kill:leader@1s", &okAfter)},
			results.VerdictUnknown, []string{"after the load: members not compared: m2: not running", "after the fault window too (under load)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := membersVerdict(tc.final, tc.windows)
			if got.Verdict != tc.verdict || got.Detail != strings.Join(tc.lines, "\n") || got.Name != CheckMembersAgree {
				t.Fatalf("got %s:\n%s\nwant %s:\n%s", got.Verdict, got.Detail, tc.verdict, strings.Join(tc.lines, "\n"))
			}
		})
	}
}
