package results

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// TestFaultEffects: a window's effect (what its members said the fault did) survives faults.jsonl's
// encoding and is printed under the fault table, one line per window that has one.
func TestFaultEffects(t *testing.T) {
	s := &Summary{Faults: []FaultWindow{
		{Fault: "kill", Spec: "kill:leader@2s+1s", Targets: []string{"m1"}, Outcome: "recovered"},
		{Fault: "failpoint", Spec: "failpoint:random=raftAfterSave:panic@4s+2s", Targets: []string{"m2"}, Outcome: "recovered",
			Effect: &Effect{Detail: "m2 panicked at raftAfterSave", Hits: map[string]int{"m2": 1}, Panicked: []string{"m2"}}},
		{Fault: "partition", Spec: "partition:follower=until-snapshot@8s+20s", Targets: []string{"m3"}, Outcome: "recovered",
			Effect: &Effect{Detail: "leader m1 compacted its log past index 1240, then m1 sent 1 snapshot(s) after the heal", SnapshotsSent: 1}},
	}}
	for _, w := range s.Faults {
		b, err := json.Marshal(w)
		if err != nil {
			t.Fatal(err)
		}
		var back FaultWindow
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(back.Effect, w.Effect) {
			t.Errorf("%s: effect %+v after a round trip, want %+v", w.Spec, back.Effect, w.Effect)
		}
		if w.Effect == nil && strings.Contains(string(b), "effect") {
			t.Errorf("%s: a window without an effect encodes one: %s", w.Spec, b)
		}
	}
	var out bytes.Buffer
	if err := writeFaultsText(&out, s); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"\n  failpoint:random=raftAfterSave:panic@4s+2s: m2 panicked at raftAfterSave\n",
		"\n  partition:follower=until-snapshot@8s+20s: leader m1 compacted its log past index 1240, then m1 sent 1 snapshot(s) after the heal\n",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the text summary lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "kill:leader@2s+1s:") {
		t.Errorf("a window without an effect got an effect line:\n%s", out.String())
	}
}
