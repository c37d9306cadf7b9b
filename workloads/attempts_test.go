package workloads

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// TestAttemptsRecorded: every attempt an operation makes on the wire is in the history, against real etcd,
// over the micro workloads' unary connection and over gRPC's alone (as the kube workload sends):
//   - a put answered at once is marked recorded, with no attempt stored (the history stays small);
//   - a read in flight to a member that is killed fails its first attempt, sent to that member, with
//     Unavailable, and etcd's client sends it again, to the member started again, which answers: every
//     attempt is stored, the first failed, the last answered;
//   - a write in flight to a member that is killed fails and is not sent again (etcd's client retries a
//     write only after a context error): one failed attempt, sent.
func TestAttemptsRecorded(t *testing.T) {
	skipUnderRace(t)
	for _, tc := range []struct {
		name string
		grpc bool // ProbeBandwidth keeps every request on gRPC's connection
	}{{"unary connection", false}, {"gRPC", true}} {
		t.Run(tc.name, func(t *testing.T) {
			c := startCluster(t, 1)
			member := c.Members()[0].(clusters.Process)
			dir := t.TempDir()
			hist, err := history.NewWriter(dir)
			if err != nil {
				t.Fatal(err)
			}
			rec := NewRecorder(time.Now(), hist, []byte("x"))
			r, err := NewRunner(clientConfig(c), rec, RunOptions{Clients: 1, Conns: 1, Total: 1, RequestTimeout: 30 * time.Second, ProbeBandwidth: tc.grpc})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			cl := r.Workers()[0].Client
			ctx := context.Background()
			if _, err := cl.Do(ctx, nil, "put", history.Request{Kind: history.KindPut, Put: &history.Put{Key: "/a", Value: cl.NewValue(16)}}); err != nil {
				t.Fatal(err)
			}
			get := history.Request{Kind: history.KindRange, Range: &history.Range{Key: "/a"}}
			if err := inFlightWhenKilled(ctx, member, func() error { _, err := cl.Do(ctx, nil, "get", get); return err }); err != nil {
				t.Fatalf("the read was not answered after the member came back: %v", err)
			}
			put := history.Request{Kind: history.KindTxn, Txn: &history.Txn{Then: []history.Request{
				{Kind: history.KindPut, Put: &history.Put{Key: "/b", Value: cl.NewValue(16)}}}}}
			if err := inFlightWhenKilled(ctx, member, func() error { _, err := cl.Do(ctx, nil, "txn", put); return err }); err == nil {
				t.Fatal("a write in flight to a killed member was answered")
			}
			if err := hist.Close(); err != nil {
				t.Fatal(err)
			}
			var ops []*history.Operation
			if err := history.ReadOperations(filepath.Join(dir, history.HistoryFile), func(op *history.Operation) error {
				ops = append(ops, op)
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if len(ops) != 3 {
				t.Fatalf("%d operations recorded, want 3", len(ops))
			}
			addr := strings.TrimPrefix(member.ClientURL(), "http://")
			for i, op := range ops {
				if !op.AttemptsRecorded {
					t.Errorf("op %d (%s): attempts not recorded", i, op.Request)
				}
				for j, a := range op.Attempts {
					if a.Start < op.Call || a.End > op.Return || a.End < a.Start {
						t.Errorf("op %d attempt %d: %d-%d outside the call %d-%d", i, j, a.Start, a.End, op.Call, op.Return)
					}
				}
				t.Logf("op %d %s: %+v", i, op.Request, op.Attempts)
			}
			if n := len(ops[0].Attempts); n != 0 {
				t.Errorf("a put answered at once stored %d attempts, want none: %+v", n, ops[0].Attempts)
			}
			read := ops[1].Attempts
			if len(read) < 2 || history.Sends(read) < 2 {
				t.Fatalf("the read sent again stored %d attempts (%d sends), want at least 2: %+v", len(read), history.Sends(read), read)
			}
			if first := read[0]; first.Code != "Unavailable" || first.NotSent || first.Peer != addr {
				t.Errorf("the read's first attempt: %+v, want Unavailable, sent to %s", first, addr)
			}
			if last := read[len(read)-1]; last.Failed() || last.NotSent {
				t.Errorf("the read's last attempt: %+v, want answered", last)
			}
			write := ops[2].Attempts
			if history.Sends(write) != 1 || write[0].Code != "Unavailable" || write[0].Peer != addr {
				t.Errorf("the write: attempts %+v, want one, sent to %s, failed with Unavailable", write, addr)
			}
		})
	}
}

// inFlightWhenKilled sends a request with do to a member that is paused, so that it is on the wire
// unanswered, kills the member, starts it again and returns what do returned.
func inFlightWhenKilled(ctx context.Context, member clusters.Process, do func() error) error {
	if err := member.Pause(ctx); err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- do() }()
	time.Sleep(300 * time.Millisecond)
	if err := member.Kill(ctx); err != nil {
		return err
	}
	time.Sleep(300 * time.Millisecond) // the client sees the connection close before the member is back
	if err := member.Start(ctx); err != nil {
		return err
	}
	return <-done
}
