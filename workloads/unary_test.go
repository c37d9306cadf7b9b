package workloads

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/etcd-chaosbench/chaosbench/clusters"
)

// grpcServer is a real gRPC server whose every method runs handle; it records the user agent of each
// request, which tells the unary connection's requests from the fallback's.
type grpcServer struct {
	addr   string
	srv    *grpc.Server
	mu     sync.Mutex
	agents []string
}

func startGRPCServer(t *testing.T, addr string, handle func(ctx context.Context, method string, stream grpc.ServerStream) error, opts ...grpc.ServerOption) *grpcServer {
	t.Helper()
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s := &grpcServer{addr: lis.Addr().String()}
	s.srv = grpc.NewServer(append(opts, grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
		md, _ := metadata.FromIncomingContext(stream.Context())
		s.mu.Lock()
		s.agents = append(s.agents, strings.Join(md.Get("user-agent"), ","))
		s.mu.Unlock()
		method, _ := grpc.MethodFromServerStream(stream)
		return handle(stream.Context(), method, stream)
	}))...)
	go s.srv.Serve(lis)
	t.Cleanup(s.srv.Stop)
	return s
}

// unaryCalls is how many requests arrived over the unary connection, and how many over the fallback.
func (s *grpcServer) unaryCalls() (unary, fallback int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, a := range s.agents {
		if strings.HasPrefix(a, "chaosbench ") {
			unary++
		} else {
			fallback++
		}
	}
	return unary, fallback
}

// newTestUnaryConn returns a unary connection to addrs, dialing addrs[first] first, whose fallback is a
// gRPC connection to addrs[0].
func newTestUnaryConn(t *testing.T, first int, addrs ...string) *unaryConn {
	t.Helper()
	fb, err := grpc.NewClient(addrs[0], append(dialOptions(false), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	eps, ok := parseUnaryEndpoints(addrs, false)
	if !ok {
		t.Fatalf("endpoints %q not understood", addrs)
	}
	u := newUnaryConn(context.Background(), fb, eps, nil, first)
	t.Cleanup(func() { u.Close(); fb.Close() })
	return u
}

// echoPut answers a PutRequest with its key's length as the revision and its value as the previous value.
func echoPut(_ context.Context, _ string, stream grpc.ServerStream) error {
	var req pb.PutRequest
	if err := stream.RecvMsg(&req); err != nil {
		return err
	}
	return stream.SendMsg(&pb.PutResponse{Header: &pb.ResponseHeader{Revision: int64(len(req.Key))}, PrevKv: &mvccpb.KeyValue{Key: req.Key, Value: req.Value}})
}

// answerRange handles puts with echoPut and ranges with answer, once the request is read.
func answerRange(answer func(ctx context.Context, req *pb.RangeRequest, stream grpc.ServerStream) error) func(context.Context, string, grpc.ServerStream) error {
	return func(ctx context.Context, method string, stream grpc.ServerStream) error {
		if strings.HasSuffix(method, "/Put") {
			return echoPut(ctx, method, stream)
		}
		var req pb.RangeRequest
		if err := stream.RecvMsg(&req); err != nil {
			return err
		}
		return answer(ctx, &req, stream)
	}
}

// TestUnaryConnConcurrentCalls: many goroutines' calls share one connection, each gets its own answer,
// and all of them go over the unary connection.
func TestUnaryConnConcurrentCalls(t *testing.T) {
	s := startGRPCServer(t, "127.0.0.1:0", echoPut)
	kv := unaryKV{newTestUnaryConn(t, 0, s.addr)}
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for g := range 50 {
		wg.Go(func() {
			for i := range 40 {
				key := fmt.Sprintf("/k/%d/%s", g, strings.Repeat("x", i))
				resp, err := kv.Put(context.Background(), &pb.PutRequest{Key: []byte(key), Value: []byte(key + "=v")})
				if err != nil {
					errs <- err
					return
				}
				if resp.Header.Revision != int64(len(key)) || string(resp.PrevKv.Value) != key+"=v" {
					errs <- fmt.Errorf("put %q answered %v", key, resp)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if unary, fallback := s.unaryCalls(); unary != 2000 || fallback != 0 {
		t.Errorf("%d calls over the unary connection and %d over the fallback, want 2000 and 0", unary, fallback)
	}
}

// TestUnaryConnStatusDeadlineMetadata: a server's status and percent-encoded message come back as gRPC's
// would, the call's deadline reaches the server, and so does the context's metadata.
func TestUnaryConnStatusDeadlineMetadata(t *testing.T) {
	type seen struct {
		left          time.Duration
		leader, trace []string
		agents        int
	}
	saw := make(chan seen, 1)
	s := startGRPCServer(t, "127.0.0.1:0", func(ctx context.Context, _ string, stream grpc.ServerStream) error {
		var req pb.RangeRequest
		if err := stream.RecvMsg(&req); err != nil {
			return err
		}
		dl, _ := ctx.Deadline()
		md, _ := metadata.FromIncomingContext(ctx)
		saw <- seen{time.Until(dl), md.Get("hasleader"), md.Get("trace-bin"), len(md.Get("user-agent"))}
		return status.Error(codes.FailedPrecondition, "100% wrong: ünïcode, \"quoted\"")
	})
	kv := unaryKV{newTestUnaryConn(t, 0, s.addr)}
	md := metadata.AppendToOutgoingContext(context.Background(), "hasleader", "true", "trace-bin", "\x00\xffbinary", "user-agent", "not sent twice")
	ctx, cancel := context.WithTimeout(md, 3*time.Second)
	defer cancel()
	_, err := kv.Range(ctx, &pb.RangeRequest{Key: []byte("a")})
	if st, _ := status.FromError(err); st.Code() != codes.FailedPrecondition || st.Message() != "100% wrong: ünïcode, \"quoted\"" {
		t.Errorf("error %v, want FailedPrecondition with the server's message", err)
	}
	got := <-saw
	if got.left <= 2*time.Second || got.left > 3*time.Second || len(got.leader) != 1 || got.leader[0] != "true" {
		t.Errorf("server saw %v left and hasleader %q, want 2-3 s and [true]", got.left, got.leader)
	}
	if len(got.trace) != 1 || got.trace[0] != "\x00\xffbinary" || got.agents != 1 {
		t.Errorf("server saw trace-bin %q and %d user agents, want the bytes sent and 1", got.trace, got.agents)
	}
}

// TestUnaryConnCancel: a canceled call returns at once with codes.Canceled and the server's handler sees
// its context canceled (the stream was reset); the connection carries the next call.
func TestUnaryConnCancel(t *testing.T) {
	serverErr := make(chan error, 1)
	s := startGRPCServer(t, "127.0.0.1:0", answerRange(func(ctx context.Context, _ *pb.RangeRequest, _ grpc.ServerStream) error {
		select {
		case <-ctx.Done():
			serverErr <- ctx.Err()
		case <-time.After(10 * time.Second):
			serverErr <- errors.New("not canceled")
		}
		return ctx.Err()
	}))
	kv := unaryKV{newTestUnaryConn(t, 0, s.addr)}
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	start := time.Now()
	_, err := kv.Range(ctx, &pb.RangeRequest{Key: []byte("a")})
	if status.Code(err) != codes.Canceled || time.Since(start) > 2*time.Second {
		t.Errorf("canceled call returned %v after %v, want Canceled at once", err, time.Since(start))
	}
	if err := <-serverErr; !errors.Is(err, context.Canceled) {
		t.Errorf("server's context: %v, want canceled", err)
	}
	if _, err := kv.Put(context.Background(), &pb.PutRequest{Key: []byte("k")}); err != nil {
		t.Errorf("call after a cancel: %v", err)
	}
}

// TestUnaryConnLargeMessages: a request larger than a frame goes to the fallback; an answer larger than
// the stream's flow-control window arrives whole over the unary connection (window updates are sent).
func TestUnaryConnLargeMessages(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<20) // 16 MiB, twice the stream window
	s := startGRPCServer(t, "127.0.0.1:0", answerRange(func(_ context.Context, req *pb.RangeRequest, stream grpc.ServerStream) error {
		return stream.SendMsg(&pb.RangeResponse{Kvs: []*mvccpb.KeyValue{{Key: req.Key, Value: big}}, Count: 1})
	}))
	kv := unaryKV{newTestUnaryConn(t, 0, s.addr)}
	val := bytes.Repeat([]byte("v"), 20<<10)
	if resp, err := kv.Put(context.Background(), &pb.PutRequest{Key: []byte("k"), Value: val}); err != nil || !bytes.Equal(resp.PrevKv.Value, val) {
		t.Fatalf("large put: %v", err)
	}
	if unary, fallback := s.unaryCalls(); unary != 0 || fallback != 1 {
		t.Errorf("large put: %d unary and %d fallback calls, want 0 and 1", unary, fallback)
	}
	for range 2 {
		resp, err := kv.Range(context.Background(), &pb.RangeRequest{Key: []byte("r")})
		if err != nil || len(resp.Kvs) != 1 || !bytes.Equal(resp.Kvs[0].Value, big) {
			t.Fatalf("large range: %v", err)
		}
	}
	if unary, _ := s.unaryCalls(); unary != 2 {
		t.Errorf("%d large ranges over the unary connection, want 2", unary)
	}
}

// TestUnaryConnRefusedStreams: calls beyond the server's concurrent-stream limit are refused unprocessed
// and go to the fallback (which waits for a free stream); every call succeeds.
func TestUnaryConnRefusedStreams(t *testing.T) {
	s := startGRPCServer(t, "127.0.0.1:0", func(ctx context.Context, method string, stream grpc.ServerStream) error {
		time.Sleep(200 * time.Millisecond)
		return echoPut(ctx, method, stream)
	}, grpc.MaxConcurrentStreams(1))
	kv := unaryKV{newTestUnaryConn(t, 0, s.addr)}
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for i := range 4 {
		wg.Go(func() {
			key := fmt.Sprintf("k%d", i)
			resp, err := kv.Put(context.Background(), &pb.PutRequest{Key: []byte(key)})
			if err == nil && resp.Header.Revision != int64(len(key)) {
				err = fmt.Errorf("put %s answered %v", key, resp)
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if unary, fallback := s.unaryCalls(); unary < 1 || fallback < 1 || unary+fallback != 4 {
		t.Errorf("%d calls over the unary connection and %d over the fallback, want at least 1 of each, 4 in all", unary, fallback)
	}
}

// TestUnaryConnServerLost: calls in flight when the server goes fail with codes.Unavailable; while it is
// down calls fail (through the fallback) without hanging; when it is back the unary connection dials it
// again and carries the calls.
func TestUnaryConnServerLost(t *testing.T) {
	block := make(chan struct{})
	handle := func(ctx context.Context, method string, stream grpc.ServerStream) error {
		if strings.HasSuffix(method, "/Range") {
			<-block
		}
		return echoPut(ctx, method, stream)
	}
	s := startGRPCServer(t, "127.0.0.1:0", handle)
	kv := unaryKV{newTestUnaryConn(t, 0, s.addr)}
	if _, err := kv.Put(context.Background(), &pb.PutRequest{Key: []byte("k")}); err != nil {
		t.Fatal(err)
	}
	failed := make(chan error, 1)
	go func() {
		_, err := kv.Range(context.Background(), &pb.RangeRequest{Key: []byte("k")})
		failed <- err
	}()
	time.Sleep(200 * time.Millisecond)
	s.srv.Stop()
	close(block)
	if err := <-failed; status.Code(err) != codes.Unavailable {
		t.Errorf("call in flight when the server stopped: %v, want Unavailable", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	_, err := kv.Put(ctx, &pb.PutRequest{Key: []byte("k")})
	cancel()
	if err == nil {
		t.Error("put with the server down succeeded")
	}

	s2 := startGRPCServer(t, s.addr, handle)
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_, err := kv.Put(ctx, &pb.PutRequest{Key: []byte("k")})
		cancel()
		if unary, _ := s2.unaryCalls(); err == nil && unary > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the unary connection did not come back within 10 s (last error %v)", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// freezer forwards TCP connections to a backend until frozen; then it forwards nothing, in either
// direction, as a paused member or a partition does, while the connections stay open.
type freezer struct {
	lis    net.Listener
	mu     sync.Mutex
	frozen bool
	conns  []net.Conn
}

func startFreezer(t *testing.T, backend string) *freezer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{lis: lis}
	go func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", backend)
			if err != nil {
				c.Close()
				continue
			}
			f.mu.Lock()
			f.conns = append(f.conns, c, b)
			f.mu.Unlock()
			go f.pipe(c, b)
			go f.pipe(b, c)
		}
	}()
	t.Cleanup(func() {
		lis.Close()
		f.mu.Lock()
		defer f.mu.Unlock()
		for _, c := range f.conns {
			c.Close()
		}
	})
	return f
}

func (f *freezer) pipe(from, to net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := from.Read(buf)
		if err != nil {
			return
		}
		for {
			f.mu.Lock()
			frozen := f.frozen
			f.mu.Unlock()
			if !frozen {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if _, err := to.Write(buf[:n]); err != nil {
			return
		}
	}
}

func (f *freezer) freeze() {
	f.mu.Lock()
	f.frozen = true
	f.mu.Unlock()
}

// TestUnaryConnSilentServer: a server that stops answering on an open connection (a paused member, a
// partition) is dropped after a call times out and a ping goes unanswered, and the calls go to the next
// endpoint; one that accepts connections and never speaks is not taken for up, and calls go to the
// fallback without waiting.
func TestUnaryConnSilentServer(t *testing.T) {
	good := startGRPCServer(t, "127.0.0.1:0", echoPut)
	frozen := startGRPCServer(t, "127.0.0.1:0", echoPut)
	f := startFreezer(t, frozen.addr)
	kv := unaryKV{newTestUnaryConn(t, 1, good.addr, f.lis.Addr().String())} // through the freezer first
	if _, err := kv.Put(context.Background(), &pb.PutRequest{Key: []byte("k")}); err != nil {
		t.Fatal(err)
	}
	if unary, _ := frozen.unaryCalls(); unary != 1 {
		t.Fatalf("the first put did not go through the freezer: %d unary calls there", unary)
	}
	time.Sleep(probeAfter) // nothing arrives on the connection from here on
	f.freeze()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	_, err := kv.Put(ctx, &pb.PutRequest{Key: []byte("k")})
	cancel()
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("put to the frozen server: %v, want DeadlineExceeded", err)
	}
	time.Sleep(probeWait + 200*time.Millisecond)
	// The first call after the drop goes to the fallback while the next endpoint is dialed; the unary
	// connection carries the calls as soon as it is up.
	for i := 0; ; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		_, err := kv.Put(ctx, &pb.PutRequest{Key: []byte("k")})
		cancel()
		if err != nil {
			t.Fatalf("put %d after the frozen server was dropped: %v", i, err)
		}
		if unary, fallback := good.unaryCalls(); unary > 0 {
			if fallback > 1 {
				t.Errorf("%d calls went to the fallback while the next endpoint was dialed, want at most 1", fallback)
			}
			break
		}
		if i == 50 {
			t.Fatal("no call went over the unary connection to the live server")
		}
		time.Sleep(20 * time.Millisecond)
	}

	mute, err := net.Listen("tcp", "127.0.0.1:0") // accepts (the kernel does), never speaks
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()
	start := time.Now()
	kv = unaryKV{newTestUnaryConn(t, 1, good.addr, mute.Addr().String())}
	ctx, cancel = context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := kv.Put(ctx, &pb.PutRequest{Key: []byte("k")}); err != nil {
		t.Fatalf("put with the first endpoint mute: %v", err)
	}
	kv.c.mu.Lock()
	up := kv.c.cur != nil
	kv.c.mu.Unlock()
	if up {
		t.Errorf("a connection to a server that never spoke counts as up")
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("dial and put took %v", d)
	}
}

// TestUnaryKVAgainstEtcd: every KV request kind, over plain TCP and over mutual TLS, answers through the
// unary connection exactly as through etcd's own client, against a real member.
func TestUnaryKVAgainstEtcd(t *testing.T) {
	t.Parallel() // judges behaviour, not latency (see TestMain)
	for _, secure := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "tls"}[secure], func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			c, err := clusters.StartEmbedded(ctx, clusters.EmbedOptions{Members: 1, Dir: t.TempDir(), TLS: secure})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close(context.Background())
			cfg := clientConfig(c)
			cli, err := clientv3.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			eps, ok := parseUnaryEndpoints(cfg.Endpoints, cfg.TLS != nil)
			if !ok {
				t.Fatalf("endpoints %q not understood", cfg.Endpoints)
			}
			u := newUnaryConn(ctx, cli.ActiveConnection(), eps, cfg.TLS, 0)
			defer u.Close()
			lean := clientv3.NewKVFromKVClient(unaryKV{u}, cli)

			for i, kv := range []clientv3.KV{lean, cli.KV} {
				p := fmt.Sprintf("/t%d/", i)
				if _, err := kv.Put(ctx, p+"a", "1"); err != nil {
					t.Fatal(err)
				}
				txn, err := kv.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(p+"b"), "=", 0)).
					Then(clientv3.OpPut(p+"b", "2"), clientv3.OpGet(p, clientv3.WithPrefix())).Commit()
				if err != nil || !txn.Succeeded || len(txn.Responses[1].GetResponseRange().Kvs) != 2 {
					t.Fatalf("txn: %v %v", txn, err)
				}
				get, err := kv.Get(ctx, p, clientv3.WithPrefix(), clientv3.WithLimit(1))
				if err != nil || len(get.Kvs) != 1 || !get.More || get.Count != 2 {
					t.Fatalf("get: %v %v", get, err)
				}
				del, err := kv.Delete(ctx, p, clientv3.WithPrefix(), clientv3.WithPrevKV())
				if err != nil || del.Deleted != 2 || len(del.PrevKvs) != 2 {
					t.Fatalf("delete: %v %v", del, err)
				}
				if _, err := kv.Compact(ctx, del.Header.Revision); err != nil {
					t.Fatal(err)
				}
				_, err = kv.Get(ctx, p, clientv3.WithRev(1))
				if !errors.Is(err, rpctypes.ErrCompacted) {
					t.Fatalf("get at a compacted revision: %v, want %v", err, rpctypes.ErrCompacted)
				}
			}
			// Six requests went over the unary connection (stream ids 1, 3, ..., 11), none to the fallback.
			if u.cur == nil || u.cur.nextID != 13 {
				t.Errorf("the unary connection carried %v requests, want 6", u.cur)
			}
		})
	}
}
