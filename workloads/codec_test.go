package workloads

import (
	"bytes"
	"context"
	"net"
	"reflect"
	"testing"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
)

// etcdMessages are requests and responses of every shape the workloads send and read, small and large
// (above gRPC's pooling threshold).
func etcdMessages() map[string][2]any {
	kv := &mvccpb.KeyValue{Key: []byte("/registry/pods/ns/p"), Value: bytes.Repeat([]byte("v"), 300), CreateRevision: 7, ModRevision: 9, Version: 2, Lease: 5}
	big := &pb.RangeResponse{Header: &pb.ResponseHeader{Revision: 99}, Count: 2000, More: true}
	for range 2000 {
		big.Kvs = append(big.Kvs, kv)
	}
	return map[string][2]any{
		"put":   {&pb.PutRequest{Key: []byte("k"), Value: []byte("value"), Lease: 3, PrevKv: true}, &pb.PutRequest{}},
		"range": {big, &pb.RangeResponse{}},
		"txn": {&pb.TxnRequest{
			Compare: []*pb.Compare{{Key: []byte("k"), Target: pb.Compare_MOD, Result: pb.Compare_EQUAL, TargetUnion: &pb.Compare_ModRevision{ModRevision: 0}}},
			Success: []*pb.RequestOp{{Request: &pb.RequestOp_RequestPut{RequestPut: &pb.PutRequest{Key: []byte("k"), Value: []byte("v")}}}},
			Failure: []*pb.RequestOp{{Request: &pb.RequestOp_RequestRange{RequestRange: &pb.RangeRequest{Key: []byte("k")}}}},
		}, &pb.TxnRequest{}},
		"watch": {&pb.WatchResponse{Header: &pb.ResponseHeader{Revision: 12}, WatchId: 4, Events: []*mvccpb.Event{
			{Type: mvccpb.PUT, Kv: kv, PrevKv: kv}, {Type: mvccpb.DELETE, Kv: &mvccpb.KeyValue{Key: []byte("k"), ModRevision: 12}},
		}}, &pb.WatchResponse{}},
	}
}

// TestEtcdCodecMatchesGRPC: the codec writes exactly the bytes gRPC's default codec writes for etcd's
// messages, and reads them back to an equal message.
func TestEtcdCodecMatchesGRPC(t *testing.T) {
	ours, theirs := newEtcdCodec(), encoding.GetCodecV2("proto")
	for name, m := range etcdMessages() {
		got, err := ours.Marshal(m[0])
		if err != nil {
			t.Fatalf("%s: marshal: %v", name, err)
		}
		want, err := theirs.Marshal(m[0])
		if err != nil {
			t.Fatalf("%s: gRPC's codec: %v", name, err)
		}
		if !bytes.Equal(got.Materialize(), want.Materialize()) {
			t.Errorf("%s: %d bytes on the wire, gRPC's codec writes %d (or different bytes)", name, got.Len(), want.Len())
		}
		if err := ours.Unmarshal(want, m[1]); err != nil {
			t.Fatalf("%s: unmarshal: %v", name, err)
		}
		got.Free()
		want.Free()
		if !reflect.DeepEqual(m[0], m[1]) {
			t.Errorf("%s: decoded %v, want %v", name, m[1], m[0])
		}
	}
}

// pieces splits b into buffers of at most n bytes, as gRPC hands over a message that arrived in
// several HTTP/2 frames.
func pieces(b []byte, n int) mem.BufferSlice {
	var s mem.BufferSlice
	for len(b) > 0 {
		k := min(n, len(b))
		s = append(s, mem.SliceBuffer(b[:k]))
		b = b[k:]
	}
	return s
}

// TestEtcdCodecPieces: a message that arrived in pieces decodes the same, also into a scratch buffer a
// larger message used before (a stale byte past the end would corrupt or fail the decode).
func TestEtcdCodecPieces(t *testing.T) {
	c := newEtcdCodec()
	msgs := etcdMessages()
	for _, name := range []string{"range", "watch", "txn", "range", "put"} {
		m := msgs[name]
		data, err := c.Marshal(m[0])
		if err != nil {
			t.Fatal(err)
		}
		wire := data.Materialize()
		for _, n := range []int{16 << 10, 7} {
			got := reflect.New(reflect.TypeOf(m[1]).Elem()).Interface()
			if err := c.Unmarshal(pieces(wire, n), got); err != nil {
				t.Fatalf("%s in pieces of %d: %v", name, n, err)
			}
			if !reflect.DeepEqual(m[0], got) {
				t.Errorf("%s in pieces of %d: decoded %v, want %v", name, n, got, m[0])
			}
		}
	}
}

// TestEtcdCodecReplaces: a message received into twice holds the second message only, as with gRPC's
// codec (etcd's generated Unmarshal alone would append the second answer's events to the first's).
func TestEtcdCodecReplaces(t *testing.T) {
	c := newEtcdCodec()
	first := &pb.WatchResponse{WatchId: 1, Events: []*mvccpb.Event{{Kv: &mvccpb.KeyValue{Key: []byte("a"), ModRevision: 5}}}}
	second := &pb.WatchResponse{WatchId: 1, Events: []*mvccpb.Event{{Kv: &mvccpb.KeyValue{Key: []byte("b"), ModRevision: 6}}}}
	var got pb.WatchResponse
	for _, m := range []*pb.WatchResponse{first, second} {
		data, err := c.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		for _, in := range []mem.BufferSlice{data, pieces(data.Materialize(), 3)} {
			if err := c.Unmarshal(in, &got); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(&got, m) {
				t.Fatalf("received %v, want %v", &got, m)
			}
		}
	}
}

// TestEtcdCodecOtherMessages: messages that are not etcd's (the health service's) go to gRPC's codec.
func TestEtcdCodecOtherMessages(t *testing.T) {
	c := newEtcdCodec()
	data, err := c.Marshal(&healthpb.HealthCheckRequest{Service: "etcd"})
	if err != nil {
		t.Fatal(err)
	}
	var got healthpb.HealthCheckRequest
	if err := c.Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if got.Service != "etcd" {
		t.Errorf("service %q, want etcd", got.Service)
	}
	if err := c.Unmarshal(mem.BufferSlice{mem.SliceBuffer([]byte{0xff})}, &pb.PutRequest{}); err == nil {
		t.Error("a truncated message decoded without an error")
	}
}

// TestDialOptionsOnTheWire: a request sent with the runner's options says "application/grpc", as etcd's
// client does (a codec name would add a content subtype), and arrives intact with and without fixed windows.
func TestDialOptionsOnTheWire(t *testing.T) {
	for _, probe := range []bool{false, true} {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		seen := make(chan []string, 1)
		srv := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, stream grpc.ServerStream) error {
			md, _ := metadata.FromIncomingContext(stream.Context())
			var req pb.PutRequest
			if err := stream.RecvMsg(&req); err != nil {
				return err
			}
			seen <- append(md.Get("content-type"), string(req.Key))
			return stream.SendMsg(&pb.PutResponse{Header: &pb.ResponseHeader{Revision: 42}})
		}))
		go srv.Serve(lis)
		conn, err := grpc.NewClient(lis.Addr().String(), append(dialOptions(probe), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
		if err != nil {
			t.Fatal(err)
		}
		var resp pb.PutResponse
		err = conn.Invoke(context.Background(), "/etcdserverpb.KV/Put", &pb.PutRequest{Key: []byte("k1"), Value: []byte("v")}, &resp)
		conn.Close()
		srv.Stop()
		if err != nil {
			t.Fatalf("probe %v: %v", probe, err)
		}
		if got := <-seen; !reflect.DeepEqual(got, []string{"application/grpc", "k1"}) || resp.Header.GetRevision() != 42 {
			t.Errorf("probe %v: server saw %q, client got revision %d; want [application/grpc k1] and 42", probe, got, resp.Header.GetRevision())
		}
	}
}
