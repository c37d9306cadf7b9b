package linearizability_test

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
)

// anomaly is a way of breaking etcd's guarantees that the injector can fake.
type anomaly string

const (
	staleRead      anomaly = "stale-read"       // answer a read with an older answer for the same key
	lostWrite      anomaly = "lost-write"       // acknowledge a put without sending it
	revisionBack   anomaly = "revision-back"    // give a write a revision below the latest one seen
	tornTxn        anomaly = "torn-txn"         // apply only the first put of a transaction, acknowledge all
	duplicateEvent anomaly = "duplicate-event"  // deliver a watch response twice
	reorderEvents  anomaly = "reordered-events" // swap two watch responses
	dropEvent      anomaly = "dropped-event"    // drop a watch response
)

var anomalies = []anomaly{staleRead, lostWrite, revisionBack, tornTxn, duplicateEvent, reorderEvents, dropEvent}

// injector sits between the recording client and etcd, as gRPC interceptors on the client's connections,
// and fakes one kind of anomaly a few times once armed. Everything else passes through untouched, so the
// history around the anomaly is real etcd's.
type injector struct {
	kind  anomaly
	mu    sync.Mutex
	rng   *rand.Rand
	from  time.Time // arm time
	max   int
	n     int  // anomalies injected
	eager bool // inject at every chance once armed (small fixtures)

	lastRev  int64
	cache    map[string]*pb.RangeResponse // per key: an earlier answer, for stale reads
	cachedAt map[string]time.Time
}

func newInjector(kind anomaly, seed uint64, after time.Duration, max int) *injector {
	return &injector{kind: kind, rng: rand.New(rand.NewPCG(seed, 1)), from: time.Now().Add(after), max: max,
		cache: map[string]*pb.RangeResponse{}, cachedAt: map[string]time.Time{}}
}

func (in *injector) dialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithChainUnaryInterceptor(in.unary), grpc.WithChainStreamInterceptor(in.stream)}
}

// fire reports whether to inject now (with probability p once armed, up to max times).
func (in *injector) fire(p float64) bool {
	if time.Now().Before(in.from) || in.n >= in.max || (!in.eager && in.rng.Float64() >= p) {
		return false
	}
	in.n++
	return true
}

func (in *injector) injected() int {
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.n
}

func (in *injector) seen(h *pb.ResponseHeader) {
	if h != nil && h.Revision > in.lastRev {
		in.lastRev = h.Revision
	}
}

func (in *injector) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoke grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	in.mu.Lock()
	defer in.mu.Unlock()
	switch method {
	case "/etcdserverpb.KV/Range":
		r := req.(*pb.RangeRequest)
		single := len(r.RangeEnd) == 0 && !r.Serializable && r.Revision == 0 && !r.CountOnly && !r.KeysOnly
		if in.kind == staleRead && single {
			key := string(r.Key)
			if old := in.cache[key]; old != nil && time.Since(in.cachedAt[key]) > 300*time.Millisecond && in.fire(0.2) {
				in.mu.Unlock()
				err := invoke(ctx, method, req, reply, cc, opts...)
				in.mu.Lock()
				if err == nil {
					*reply.(*pb.RangeResponse) = *old
				}
				return err
			}
		}
		in.mu.Unlock()
		err := invoke(ctx, method, req, reply, cc, opts...)
		in.mu.Lock()
		if err == nil {
			resp := reply.(*pb.RangeResponse)
			in.seen(resp.Header)
			if single && (in.cache[string(r.Key)] == nil || time.Since(in.cachedAt[string(r.Key)]) > time.Second) {
				c := *resp
				in.cache[string(r.Key)], in.cachedAt[string(r.Key)] = &c, time.Now()
			}
		}
		return err
	case "/etcdserverpb.KV/Put":
		if in.kind == lostWrite && in.lastRev > 0 && in.fire(0.1) {
			resp := reply.(*pb.PutResponse)
			resp.Header = &pb.ResponseHeader{Revision: in.lastRev + 1}
			return nil
		}
		in.mu.Unlock()
		err := invoke(ctx, method, req, reply, cc, opts...)
		in.mu.Lock()
		if err == nil {
			resp := reply.(*pb.PutResponse)
			if in.kind == revisionBack && resp.Header.Revision > 10 && in.fire(0.1) {
				h := *resp.Header
				h.Revision -= 3
				resp.Header = &h
			}
			in.seen(resp.Header)
		}
		return err
	case "/etcdserverpb.KV/Txn":
		r := req.(*pb.TxnRequest)
		if in.kind == tornTxn && len(r.Compare) == 0 && len(r.Success) == 2 && r.Success[0].GetRequestPut() != nil &&
			r.Success[1].GetRequestPut() != nil && in.fire(0.3) {
			half := &pb.TxnRequest{Success: r.Success[:1]}
			in.mu.Unlock()
			err := invoke(ctx, method, half, reply, cc, opts...)
			in.mu.Lock()
			if err == nil {
				resp := reply.(*pb.TxnResponse)
				second := &pb.ResponseOp{Response: &pb.ResponseOp_ResponsePut{ResponsePut: &pb.PutResponse{Header: resp.Header}}}
				if r.Success[1].GetRequestPut().PrevKv {
					second.GetResponsePut().PrevKv = nil
				}
				resp.Responses = append(resp.Responses, second)
			}
			return err
		}
		in.mu.Unlock()
		err := invoke(ctx, method, req, reply, cc, opts...)
		in.mu.Lock()
		if err == nil {
			in.seen(reply.(*pb.TxnResponse).Header)
		}
		return err
	}
	in.mu.Unlock()
	err := invoke(ctx, method, req, reply, cc, opts...)
	in.mu.Lock()
	return err
}

func (in *injector) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil || method != "/etcdserverpb.Watch/Watch" {
		return s, err
	}
	switch in.kind {
	case duplicateEvent, reorderEvents, dropEvent:
		return &watchStream{ClientStream: s, in: in}, nil
	}
	return s, nil
}

// watchStream disturbs the watch responses etcd sends: events responses only, never creations,
// cancellations or progress notifications.
type watchStream struct {
	grpc.ClientStream
	in      *injector
	pending []*pb.WatchResponse
}

func hasEvents(r *pb.WatchResponse) bool {
	return len(r.Events) > 0 && !r.Created && !r.Canceled
}

func (w *watchStream) RecvMsg(m any) error {
	out := m.(*pb.WatchResponse)
	if len(w.pending) > 0 {
		*out = *w.pending[0]
		w.pending = w.pending[1:]
		return nil
	}
	for {
		if err := w.ClientStream.RecvMsg(m); err != nil {
			return err
		}
		if !hasEvents(out) {
			return nil
		}
		w.in.mu.Lock()
		var fire bool
		switch w.in.kind {
		case duplicateEvent:
			if fire = w.in.fire(0.05); fire {
				c := *out
				w.pending = append(w.pending, &c)
			}
		case dropEvent:
			if fire = w.in.fire(0.05); fire {
				w.in.mu.Unlock()
				continue
			}
		case reorderEvents:
			if fire = w.in.fire(0.05); fire {
				// Deliver the next response first, then this one.
				held := *out
				w.in.mu.Unlock()
				if err := w.ClientStream.RecvMsg(m); err != nil {
					return err
				}
				w.pending = append(w.pending, &held)
				return nil
			}
		}
		w.in.mu.Unlock()
		return nil
	}
}
