package main

import (
	"context"
	"errors"
	"io"
	"math"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	"github.com/etcd-chaosbench/chaosbench"
	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// rawCodec passes gRPC messages through as the bytes they are, so that the proxy forwards every method of
// etcd's API without knowing it, and decodes only what it means to tamper with.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error {
	*v.(*[]byte) = append([]byte(nil), data...)
	return nil
}
func (rawCodec) Name() string { return "proto" }

// lossyProxy is a gRPC proxy in front of a real etcd that acknowledges some writes without forwarding them:
// once armed, one write transaction in every few (puts only, as the kube workload's creates and updates are)
// is answered as a success at the revision after the latest one seen, and never reaches etcd. Everything
// else, the other writes, reads and watches, passes through to etcd untouched, so the history around the
// lost writes is real etcd's.
type lossyProxy struct {
	lis      net.Listener
	srv      *grpc.Server
	upstream *grpc.ClientConn
	// armAfter is how long after the first write the proxy starts losing writes; every is one in how
	// many writes it then loses; max bounds the losses.
	armAfter time.Duration
	every    int
	max      int

	mu      sync.Mutex
	first   time.Time
	writes  int
	lost    int
	lastHdr pb.ResponseHeader
}

// startLossyProxy listens on a local port and forwards to the etcd client URL upstream.
func startLossyProxy(t *testing.T, upstream string, armAfter time.Duration, every, max int) *lossyProxy {
	t.Helper()
	conn, err := grpc.NewClient(strings.TrimPrefix(upstream, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{}), grpc.MaxCallRecvMsgSize(math.MaxInt32), grpc.MaxCallSendMsgSize(math.MaxInt32)))
	if err != nil {
		t.Fatal(err)
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &lossyProxy{lis: lis, upstream: conn, armAfter: armAfter, every: every, max: max}
	p.srv = grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(p.handle),
		grpc.MaxRecvMsgSize(math.MaxInt32), grpc.MaxSendMsgSize(math.MaxInt32))
	go p.srv.Serve(lis)
	t.Cleanup(func() {
		p.srv.Stop()
		conn.Close()
	})
	return p
}

// endpoint is the proxy's client URL.
func (p *lossyProxy) endpoint() string { return "http://" + p.lis.Addr().String() }

// losses returns how many writes the proxy acknowledged without forwarding.
func (p *lossyProxy) losses() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lost
}

// handle forwards one call of any method: both directions of the stream, headers and trailers.
func (p *lossyProxy) handle(_ any, ss grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(ss)
	ctx := ss.Context()
	md, _ := metadata.FromIncomingContext(ctx)
	ctx = metadata.NewOutgoingContext(ctx, md.Copy())
	if method == "/etcdserverpb.KV/Txn" {
		return p.txn(ctx, ss)
	}
	cs, err := p.upstream.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method)
	if err != nil {
		return err
	}
	up := make(chan error, 1)
	go func() {
		for {
			var m []byte
			if err := ss.RecvMsg(&m); err != nil {
				if errors.Is(err, io.EOF) {
					err = cs.CloseSend()
				}
				up <- err
				return
			}
			if err := cs.SendMsg(&m); err != nil {
				up <- err
				return
			}
		}
	}()
	if h, err := cs.Header(); err == nil {
		ss.SendHeader(h)
	}
	for {
		var m []byte
		err := cs.RecvMsg(&m)
		if errors.Is(err, io.EOF) {
			ss.SetTrailer(cs.Trailer())
			return nil
		}
		if err != nil {
			ss.SetTrailer(cs.Trailer())
			return err
		}
		if method == "/etcdserverpb.KV/Range" || method == "/etcdserverpb.KV/Put" {
			p.seen(method, m)
		}
		if err := ss.SendMsg(&m); err != nil {
			return err
		}
	}
}

// seen remembers the latest response header etcd sent, for the revision a lost write is acknowledged at.
func (p *lossyProxy) seen(method string, m []byte) {
	var h *pb.ResponseHeader
	switch method {
	case "/etcdserverpb.KV/Range":
		var r pb.RangeResponse
		if r.Unmarshal(m) == nil {
			h = r.Header
		}
	case "/etcdserverpb.KV/Put":
		var r pb.PutResponse
		if r.Unmarshal(m) == nil {
			h = r.Header
		}
	case "/etcdserverpb.KV/Txn":
		var r pb.TxnResponse
		if r.Unmarshal(m) == nil {
			h = r.Header
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if h != nil && h.Revision > p.lastHdr.Revision {
		p.lastHdr = *h
	}
}

// txn forwards a transaction, or loses it: acknowledges it as applied without sending it.
func (p *lossyProxy) txn(ctx context.Context, ss grpc.ServerStream) error {
	var m []byte
	if err := ss.RecvMsg(&m); err != nil {
		return err
	}
	var req pb.TxnRequest
	if err := req.Unmarshal(m); err == nil {
		if resp := p.lose(&req); resp != nil {
			b, err := resp.Marshal()
			if err != nil {
				return err
			}
			return ss.SendMsg(&b)
		}
	}
	var out []byte
	var header, trailer metadata.MD
	err := p.upstream.Invoke(ctx, "/etcdserverpb.KV/Txn", &m, &out, grpc.Header(&header), grpc.Trailer(&trailer))
	ss.SetHeader(header)
	ss.SetTrailer(trailer)
	if err != nil {
		return err
	}
	p.seen("/etcdserverpb.KV/Txn", out)
	return ss.SendMsg(&out)
}

// lose returns the fabricated answer to a write transaction the proxy loses, or nil to forward it.
func (p *lossyProxy) lose(req *pb.TxnRequest) *pb.TxnResponse {
	if len(req.Success) == 0 {
		return nil
	}
	for _, op := range req.Success {
		if op.GetRequestPut() == nil {
			return nil
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.first.IsZero() {
		p.first = time.Now()
	}
	p.writes++
	if time.Since(p.first) < p.armAfter || p.lost >= p.max || p.writes%p.every != 0 || p.lastHdr.Revision == 0 {
		return nil
	}
	p.lost++
	h := p.lastHdr
	h.Revision++
	resp := &pb.TxnResponse{Header: &h, Succeeded: true}
	for range req.Success {
		resp.Responses = append(resp.Responses, &pb.ResponseOp{Response: &pb.ResponseOp_ResponsePut{ResponsePut: &pb.PutResponse{Header: &h}}})
	}
	return resp
}

// TestQualifyLostWrites: qualify against a cluster that acknowledges writes it never applies (a real
// one-member etcd behind lossyProxy) exits 4, names the violation in its verdict line, and states the one
// member it observed, not the flag's default of three: for an explicit class and for --class auto, whose
// smallest class is the one that loses the writes here (recorded summaries test a violation above a class
// that passed, in TestDecideQualification).
func TestQualifyLostWrites(t *testing.T) {
	t.Parallel() // judges outcomes and files, not latency (see TestMain)
	for _, class := range []string{"small", "auto"} {
		t.Run("--class "+class, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			member, err := clusters.StartEmbedded(ctx, clusters.EmbedOptions{Members: 1, Dir: t.TempDir()})
			if err != nil {
				t.Fatalf("start a member: %v", err)
			}
			t.Cleanup(func() { member.Close(context.Background()) })
			p := startLossyProxy(t, member.Endpoints()[0], 2*time.Second, 10, 5)

			code, out, q := qualify(t, "--cluster", "external", "--endpoints", p.endpoint(), "--class", class,
				"--step-duration", "4s", "--warmup", "1s", "--disk-probe=false")
			line := verdictLine(t, out, q)
			if p.losses() == 0 {
				t.Fatalf("the proxy lost no write: nothing was tested")
			}
			if code != outcome.ExitViolation || q.Outcome.Kind != outcome.Violation || q.ExitCode != outcome.ExitViolation ||
				!strings.HasPrefix(line, "FAIL (violation): not qualified for small (50 nodes): linearizability: ") {
				t.Fatalf("%d writes lost: exit %d, outcome %s, verdict %q; want exit 4 and a verdict naming the violation", p.losses(), code, q.Outcome.Kind, line)
			}
			if !strings.Contains(out, "\nverdict: FAIL (violation, exit code 4)\n") {
				t.Errorf("the outcome printed last is not the violation")
			}
			md, err := os.ReadFile(filepath.Join(qualificationDir(t, out), chaosbench.QualificationReport))
			if q.Cluster.Members != 1 || err != nil || !strings.Contains(string(md), "Cluster: external, 1 member, etcd ") {
				t.Fatalf("cluster %+v, %s: %v\n%.500s\nwant the one member the steps observed", q.Cluster, chaosbench.QualificationReport, err, md)
			}
		})
	}
}

// qualificationDir returns the qualification's directory, as qualify printed it.
func qualificationDir(t *testing.T, out string) string {
	t.Helper()
	for _, line := range strings.Split(out, "\n") {
		if dir, ok := strings.CutPrefix(line, "results: "); ok {
			return dir
		}
	}
	t.Fatalf("qualify did not print its directory")
	return ""
}
