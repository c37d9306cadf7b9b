package linearizability

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// realTimeFindings checks h and returns its linearizability violations of the real-time order.
func realTimeFindings(t *testing.T, h *history.History) []Violation {
	t.Helper()
	rep, err := Check(context.Background(), h, Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var vs []Violation
	for _, v := range rep.Violations {
		if v.Check == CheckLinearizability && slices.Contains([]string{"stale read", "revision order contradicts real time", "read from the future"}, v.Kind) {
			vs = append(vs, v)
		}
	}
	return vs
}

// TestRealTimeWatchEvidence: a watch record is evidence that its revision existed when it arrived. A read
// sent after a watcher received revision 3 may not read revision 2, though the write of revision 3 was
// acknowledged only later; sent before, it may. The watch records are not held by the check, so this
// needs the comparison made as watch.bin is read.
func TestRealTimeWatchEvidence(t *testing.T) {
	k1 := kv("k", 1, 2, 2, 1)
	k2 := kv("k", 2, 2, 3, 2)
	history := func(readAt int64) *history.History {
		b := new(hb).
			watch(history.WatchResponse{Watcher: 4, Time: 0, Request: &history.WatchRequest{Key: "k"}}).
			watch(history.WatchResponse{Watcher: 4, Time: 5, Revision: 1, Created: true}).
			op(0, 10, 20, putReq("k", 1), putResp(2)).
			watch(history.WatchResponse{Watcher: 4, Time: 21, Revision: 2, Events: []history.Event{{Type: history.EventPut, KV: k1, IsCreate: true}}}).
			op(0, 30, 500, putReq("k", 2), putResp(3)).
			watch(history.WatchResponse{Watcher: 4, Time: 100, Revision: 3, Events: []history.Event{{Type: history.EventPut, KV: k2}}}).
			op(1, readAt, readAt+10, getReq("k"), getResp(2, k1))
		return &b.h
	}
	if vs := realTimeFindings(t, history(50)); len(vs) != 0 {
		t.Fatalf("a read sent before the watcher received revision 3 may read revision 2; found %v", vs)
	}
	vs := realTimeFindings(t, history(200))
	if len(vs) != 1 {
		t.Fatalf("want one stale read, found %d: %v", len(vs), vs)
	}
	v := vs[0]
	if v.Kind != "stale read" || v.Watcher != 4 || !slices.Equal(v.Ops, []int{2}) || v.Revision != 3 ||
		!strings.Contains(v.Message, "after watcher 4 had received revision 3") {
		t.Fatalf("found %+v; want a stale read of op 2 against watcher 4's revision 3", v)
	}
}

// TestRealTimeOneViolationPerEarlyOperation: a read that missed several acknowledged writes is one
// anomaly, reported against the first of them in revision order; every such read is reported, up to 1000.
func TestRealTimeOneViolationPerEarlyOperation(t *testing.T) {
	b := new(hb).op(0, 0, 10, putReq("k", 1), putResp(2))
	for i := range 3 {
		b.op(0, 20+int64(i)*10, 25+int64(i)*10, putReq("k", uint64(i+2)), putResp(int64(i+3)))
	}
	k1 := kv("k", 1, 2, 2, 1)
	b.op(1, 100, 110, getReq("k"), getResp(2, k1)) // op 4: missed revisions 3, 4 and 5
	vs := realTimeFindings(t, &b.h)
	if len(vs) != 1 {
		t.Fatalf("want one stale read, found %d: %v", len(vs), vs)
	}
	if v := vs[0]; v.Kind != "stale read" || !slices.Equal(v.Ops, []int{1, 4}) || v.Revision != 3 {
		t.Fatalf("found %+v; want op 4's stale read against op 1, the write of revision 3", v)
	}

	// 1,200 reads of an empty key, each answered at the revision before a write acknowledged before it was
	// sent (only the revision order says they are stale): 1,000 are reported, the first in that order.
	b = new(hb)
	for i := range int64(1200) {
		b.op(0, i*100, i*100+10, putReq(fmt.Sprintf("w%04d", i), uint64(i+1)), putResp(i+2))
		b.op(1, i*100+20, i*100+30, getReq("z"), getResp(i+1))
	}
	rep, err := Check(context.Background(), &b.h, Options{Timeout: time.Minute})
	if err != nil || !rep.Violated() || rep.ViolationCount[CheckLinearizability] != 1000 {
		t.Fatalf("counted %v violations (%v), want 1000 stale reads", rep.ViolationCount, err)
	}
	for _, v := range rep.Violations {
		if v.Kind != "stale read" || len(v.Ops) != 2 || v.Ops[1] != v.Ops[0]+1 || v.Ops[1] >= 2*1000 {
			t.Fatalf("reported %+v; want the stale reads of the first 1000 reads, each against its write", v)
		}
	}
}
