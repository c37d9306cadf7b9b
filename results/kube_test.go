package results

import "testing"

// TestCompareMixCountsConflictsOnce: an update or delete that failed its comparison was retried, so its
// failed attempts are conflicts, not planned operations; a create that lost its race was not retried and
// counts.
func TestCompareMixCountsConflictsOnce(t *testing.T) {
	planned := map[string]float64{"delete/pods": 2.5, "create/pods": 2.5, "get/pods": 5}
	ops := map[string]*Operation{
		"delete/pods": {Count: 370, Failed: 120},
		"create/pods": {Count: 250, Failed: 10},
		"get/pods":    {Count: 600},
	}
	mix, worst := CompareMix(planned, nil, ops, 100)
	want := map[string]float64{"delete/pods": 2.5, "create/pods": 2.5, "get/pods": 6}
	for _, m := range mix {
		if m.Measured != want[m.Op] {
			t.Errorf("%s: measured %g/s, want %g", m.Op, m.Measured, want[m.Op])
		}
	}
	if worst != 20 {
		t.Errorf("largest deviation %g%%, want 20%% (get/pods)", worst)
	}
}
