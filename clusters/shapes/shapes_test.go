package shapes

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"

	"github.com/etcd-chaosbench/chaosbench/clusters"
)

func TestMain(m *testing.M) {
	clusters.RunMemberIfRequested()
	os.Exit(m.Run())
}

// startProxied starts one real member and a proxy in front of it, both stopped when the test ends.
func startProxied(ctx context.Context, t *testing.T) *Proxy {
	t.Helper()
	c, err := clusters.StartEmbedded(ctx, clusters.EmbedOptions{Members: 1, Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	p, err := Start(c.Endpoints()[0], nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestProxyCountsShapesAndChangesNothing: requests through the proxy reach a real etcd and come back as
// they would directly (values, revisions, watch events, an error status), and every request is counted
// under its shape.
func TestProxyCountsShapesAndChangesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := startProxied(ctx, t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{p.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()

	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	events := cli.Watch(wctx, "/registry/pods/", clientv3.WithPrefix(), clientv3.WithPrevKV(), clientv3.WithProgressNotify())
	lease, err := cli.Grant(ctx, 3660)
	if err != nil {
		t.Fatal(err)
	}
	create, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision("/registry/pods/a"), "=", 0)).
		Then(clientv3.OpPut("/registry/pods/a", "one", clientv3.WithLease(lease.ID))).Commit()
	if err != nil || !create.Succeeded {
		t.Fatal(create, err)
	}
	update, err := cli.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision("/registry/pods/a"), "=", create.Header.Revision)).
		Then(clientv3.OpPut("/registry/pods/a", "two")).Else(clientv3.OpGet("/registry/pods/a")).Commit()
	if err != nil || !update.Succeeded {
		t.Fatal(update, err)
	}
	get, err := cli.Get(ctx, "/registry/pods/a", clientv3.WithLimit(1))
	if err != nil || len(get.Kvs) != 1 || string(get.Kvs[0].Value) != "two" || get.Kvs[0].ModRevision != update.Header.Revision {
		t.Fatalf("read back %v, %v", get, err)
	}
	for range 2 {
		select {
		case wr := <-events:
			if wr.Err() != nil {
				t.Fatal(wr.Err())
			}
			if len(wr.Events) == 0 {
				continue
			}
		case <-ctx.Done():
			t.Fatal("no watch event through the proxy")
		}
	}
	if _, err := cli.Compact(ctx, update.Header.Revision); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Get(ctx, "/registry/pods/", clientv3.WithPrefix(), clientv3.WithLimit(500), clientv3.WithRev(create.Header.Revision)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("a read at a compacted revision through the proxy: %v, want etcd's ErrCompacted", err)
	}

	counts := p.Counts()
	for shape, want := range map[string]int64{
		"LeaseGrant ttl=3660s":                        1,
		"Txn mod=0 ? put+lease":                       1,
		"Txn mod= ? put : range":                      1,
		"Range key limit=1":                           1,
		"Range prefix limit=500 rev":                  1,
		"Watch create prefix prev_kv progress_notify": 1,
		"Compact": 1,
	} {
		if counts[shape] != want {
			t.Errorf("%q counted %d times, want %d (all: %v)", shape, counts[shape], want, counts)
		}
	}
	p.Reset()
	if len(p.Counts()) != 0 {
		t.Fatal("counts kept after Reset")
	}
}

// TestProxyAcceptsEtcdKeepalives: a client that pings a quiet connection as often as etcd allows (gRPC's
// floor of 10 s is inside etcd's 5 s minimum) keeps its connection and its open watch through the proxy.
// With gRPC's default rules the proxy would answer the third ping with GOAWAY (too_many_pings) about 30 s in
// and end every stream on the connection, which kube-apiservers then recover from by listing again.
func TestProxyAcceptsEtcdKeepalives(t *testing.T) {
	if testing.Short() {
		t.Skip("waits 35 s for the client's keepalive pings")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	p := startProxied(ctx, t)
	conn, err := grpc.NewClient(strings.TrimPrefix(p.Endpoint(), "http://"),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second, PermitWithoutStream: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	watch, err := pb.NewWatchClient(conn).Watch(ctx)
	if err != nil {
		t.Fatal(err)
	}
	create := &pb.WatchRequest{RequestUnion: &pb.WatchRequest_CreateRequest{CreateRequest: &pb.WatchCreateRequest{Key: []byte("k")}}}
	if err := watch.Send(create); err != nil {
		t.Fatal(err)
	}
	if resp, err := watch.Recv(); err != nil || !resp.Created {
		t.Fatalf("watch not created: %v, %v", resp, err)
	}
	next := make(chan error, 1)
	go func() {
		resp, err := watch.Recv()
		if err == nil && (len(resp.Events) != 1 || string(resp.Events[0].Kv.Key) != "k") {
			err = fmt.Errorf("want the put of k, got %v", resp)
		}
		next <- err
	}()
	select {
	case err := <-next:
		t.Fatalf("the quiet watch ended after its client's keepalive pings: %v", err)
	case <-time.After(35 * time.Second):
	}
	if _, err := pb.NewKVClient(conn).Put(ctx, &pb.PutRequest{Key: []byte("k"), Value: []byte("v")}); err != nil {
		t.Fatalf("put on the same connection: %v", err)
	}
	select {
	case err := <-next:
		if err != nil {
			t.Fatal(err)
		}
	case <-ctx.Done():
		t.Fatal("the put's event never reached the watch")
	}
}
