package linearizability

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// txnPastRead is txn-mixed's write with a read at a past revision: Then(put key=id, get key@rev).
func txnPastRead(key string, id uint64, rev int64) history.Request {
	return history.Request{Kind: history.KindTxn, Txn: &history.Txn{Then: []history.Request{
		putReq(key, id), {Kind: history.KindRange, Range: &history.Range{Key: key, Revision: rev}}}}}
}

// txnPastReadResp is etcd's answer to txnPastRead: the put at rev, the read of what was there at the past
// revision.
func txnPastReadResp(rev int64, read ...history.KV) *history.Response {
	return &history.Response{Revision: rev, Txn: &history.TxnResponse{Succeeded: true, Results: []history.Response{*putResp(rev), *getResp(rev, read...)}}}
}

// compactReq compacts to rev.
func compactReq(rev int64) history.Request {
	return history.Request{Kind: history.KindCompact, Compact: &history.Compact{Revision: rev}}
}

// refused makes the last operation of b a failure with etcd's error text.
func (b *hb) refused(text string) *hb {
	b.h.Operations[len(b.h.Operations)-1].Error = "etcdserver: mvcc: " + text
	return b
}

// TestTxnPastReads: a transaction that reads at a past revision is refused whole when that revision is
// compacted (or in the future), and must then be applied nowhere (etcd-io/etcd#18667); one etcd answers
// must not have read below an acknowledged compaction; one refused as compacted must have asked below a
// compaction that was sent.
func TestTxnPastReads(t *testing.T) {
	k1 := kv("k", 1, 2, 2, 1)
	k2 := kv("k", 2, 2, 3, 2)
	k3 := kv("k", 3, 2, 4, 3)
	base := func() *hb {
		return new(hb).
			op(0, 0, 10, putReq("k", 1), putResp(2)).
			op(0, 20, 30, putReq("k", 2), putResp(3)).
			op(0, 40, 50, compactReq(3), &history.Response{Revision: 3})
	}
	for _, tc := range []struct {
		name string
		h    *hb
		want string // "" for a pass; else the kind of the violation
	}{
		{"refused as compacted, applied nowhere", base().
			op(1, 60, 70, txnPastRead("k", 3, 2), nil).refused(errTextCompacted).
			op(1, 80, 90, getReq("k"), getResp(3, k2)), ""},
		{"refused as compacted, applied all the same (#18667)", base().
			op(1, 60, 70, txnPastRead("k", 3, 2), nil).refused(errTextCompacted).
			op(1, 80, 90, getReq("k"), getResp(4, k3)), "refused write took effect"},
		{"refused as a future revision, applied all the same", base().
			op(1, 60, 70, txnPastRead("k", 3, 99), nil).refused(errTextFutureRev).
			op(1, 80, 90, getReq("k"), getResp(4, k3)), "refused write took effect"},
		{"answered above the compaction", base().
			op(1, 60, 70, txnPastRead("k", 3, 3), txnPastReadResp(4, k2)).
			op(1, 80, 90, getReq("k"), getResp(4, k3)), ""},
		{"the past read does not count as a read of the present", base().
			op(1, 60, 70, txnPastRead("k", 3, 3), txnPastReadResp(4, k2)), ""},
		{"answered below an acknowledged compaction", base().
			op(1, 60, 70, txnPastRead("k", 3, 2), txnPastReadResp(4, k1)), "read of compacted revision"},
		{"answered below a compaction still running", new(hb).
			op(0, 0, 10, putReq("k", 1), putResp(2)).
			op(0, 20, 30, putReq("k", 2), putResp(3)).
			op(0, 40, 80, compactReq(3), &history.Response{Revision: 3}).
			op(1, 60, 70, txnPastRead("k", 3, 2), txnPastReadResp(4, k1)), ""},
		{"refused as compacted with nothing compacted", new(hb).
			op(0, 0, 10, putReq("k", 1), putResp(2)).
			op(0, 20, 30, putReq("k", 2), putResp(3)).
			op(1, 60, 70, txnPastRead("k", 3, 2), nil).refused(errTextCompacted), "compacted without a compaction"},
		{"refused as compacted, the compaction sent before the answer", new(hb).
			op(0, 0, 10, putReq("k", 1), putResp(2)).
			op(0, 20, 30, putReq("k", 2), putResp(3)).
			op(0, 50, 100, compactReq(3), &history.Response{Revision: 3}).
			op(1, 40, 70, txnPastRead("k", 3, 2), nil).refused(errTextCompacted), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rep, err := Check(context.Background(), &tc.h.h, Options{Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			// Read while it is written (Follower), the history checks the same: the refusals are part of
			// the operations' fold the check takes.
			if followed := checkFollowed(t, &tc.h.h); verdictsOf(followed) != verdictsOf(rep) {
				t.Fatalf("read while written:\n%s\nin memory:\n%s", verdictsOf(followed), verdictsOf(rep))
			}
			var lin *results.Check
			for i := range rep.Checks {
				if rep.Checks[i].Name == CheckLinearizability {
					lin = &rep.Checks[i]
				}
			}
			if lin == nil {
				t.Fatalf("no linearizability check in %+v", rep.Checks)
			}
			if tc.want == "" {
				if lin.Verdict != results.VerdictOK {
					t.Fatalf("%s: %s", lin.Verdict, lin.Detail)
				}
				return
			}
			if lin.Verdict != results.VerdictViolation {
				t.Fatalf("%s: %s; want a violation: %s", lin.Verdict, lin.Detail, tc.want)
			}
			var kinds []string
			for _, v := range rep.Violations {
				kinds = append(kinds, v.Kind)
				if v.Kind == tc.want {
					t.Logf("%s", v.Message)
					return
				}
			}
			t.Fatalf("violations %q, want one of kind %q", kinds, tc.want)
		})
	}
}

// checkFollowed writes h to a run directory through a history writer while a Follower reads it, and
// checks it with what the follower read.
func checkFollowed(t *testing.T, h *history.History) *Report {
	t.Helper()
	dir := t.TempDir()
	w, err := history.NewWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	f := Follow(dir)
	defer f.Close()
	for i := range h.Operations {
		w.Operation(&h.Operations[i])
	}
	for i := range h.Watches {
		w.Watch(&h.Watches[i])
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Finish(); err != nil {
		t.Fatal(err)
	}
	if f.folded == nil || f.folded.ops == nil || f.folded.ops.Len() != len(h.Operations) {
		t.Fatal("the follower did not fold the operations")
	}
	rep, err := CheckDir(context.Background(), dir, Options{Timeout: 10 * time.Second, Followed: f})
	if rep == nil {
		t.Fatal(err)
	}
	return rep
}

// verdictsOf is a report's verdicts, details and violations, without times and paths.
func verdictsOf(r *Report) string {
	var s string
	for _, c := range r.Checks {
		detail, _, _ := strings.Cut(c.Detail, "\nvisualization:")
		s += fmt.Sprintf("%s %s %s\n", c.Name, c.Verdict, detail)
	}
	for _, v := range r.Violations {
		s += v.String() + "\n"
	}
	return s
}
