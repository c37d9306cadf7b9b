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
//     attempt is stored, the first failed, the last answered (over the unary connection the read may fail
//     instead, when its one attempt on gRPC's connection is cut too: then its attempts say that);
//   - a write in flight to a member that is killed fails and is not sent again (etcd's client retries a
//     write only after a context error): one failed attempt, sent. Over the unary connection, which may give
//     up on a paused member before the write reaches it, the write may instead go out once, answered.
func TestAttemptsRecorded(t *testing.T) {
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
			readErr := inFlightWhenKilled(ctx, member, func() error { _, err := cl.Do(ctx, nil, "get", get); return err })
			if readErr != nil && tc.grpc {
				t.Fatalf("the read was not answered after the member came back: %v", readErr)
			}
			put := history.Request{Kind: history.KindTxn, Txn: &history.Txn{Then: []history.Request{
				{Kind: history.KindPut, Put: &history.Put{Key: "/b", Value: cl.NewValue(16)}}}}}
			writeErr := inFlightWhenKilled(ctx, member, func() error { _, err := cl.Do(ctx, nil, "txn", put); return err })
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
			switch {
			case readErr != nil:
				// Over the unary connection a read that finds it gone goes once to gRPC's connection, without
				// the repeatable policy of etcd's KV client: when that attempt is cut too, the read fails. Its
				// attempts must say so.
				if len(read) == 0 || read[len(read)-1].Code != "Unavailable" || read[0].Peer != addr {
					t.Errorf("the read failed (%v), its attempts %+v, want the last failed Unavailable, the first sent to %s", readErr, read, addr)
				}
			case len(read) < 2 || history.Sends(read) < 2:
				t.Fatalf("the read sent again stored %d attempts (%d sends), want at least 2: %+v", len(read), history.Sends(read), read)
			default:
				if first := read[0]; first.Code != "Unavailable" || first.NotSent || first.Peer != addr {
					t.Errorf("the read's first attempt: %+v, want Unavailable, sent to %s", first, addr)
				}
				if last := read[len(read)-1]; last.Failed() || last.NotSent {
					t.Errorf("the read's last attempt: %+v, want answered", last)
				}
			}
			// A write that reached the member when it was killed fails, and is not sent again; one that did not
			// reach it yet (the unary connection may have given up on the paused member first) goes out once,
			// when the member is back. Either way it is sent once at most.
			write := ops[2].Attempts
			switch {
			case history.Sends(write) > 1:
				t.Errorf("the write was sent %d times: %+v", history.Sends(write), write)
			case writeErr == nil && len(write) > 0 && write[len(write)-1].Failed():
				t.Errorf("the write was answered, its last attempt failed: %+v", write)
			case writeErr != nil && (len(write) == 0 || write[len(write)-1].Code != "Unavailable" || write[len(write)-1].Peer != addr):
				t.Errorf("the write failed (%v): attempts %+v, want the last sent to %s and failed with Unavailable", writeErr, write, addr)
			}
			if tc.grpc && writeErr == nil {
				t.Errorf("a write on gRPC's connection, in flight to a killed member, was answered: %+v", write)
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
