package workloads

import (
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
)

// gogoMessage is what etcd's generated (gogoproto) messages implement: they size, marshal and unmarshal
// themselves, without reflection.
type gogoMessage interface {
	Reset()
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
	Unmarshal([]byte) error
}

// etcdCodec encodes etcd's messages with their generated methods. gRPC's default codec hands every message
// of etcd's API to protobuf's adapter for legacy messages, which wraps it on every request and response
// (about 4% of a closed-loop put's client CPU); the bytes on the wire are the same. Messages that are not
// etcd's go to gRPC's own codec.
type etcdCodec struct {
	fallback encoding.CodecV2
	// scratch holds the buffers large responses that arrive in several pieces are gathered in. gRPC's own
	// pool clears every buffer it hands out, which for the kube workload's list pages (megabytes each) was
	// a fifth of the generator's CPU; etcd's generated Unmarshal copies what it keeps, so a reused buffer
	// needs no clearing.
	scratch *sync.Pool
}

func newEtcdCodec() etcdCodec {
	return etcdCodec{fallback: encoding.GetCodecV2("proto"), scratch: &sync.Pool{}}
}

// Marshal encodes v into one buffer, from gRPC's pool when it is large enough to be worth pooling.
func (c etcdCodec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(gogoMessage)
	if !ok {
		return c.fallback.Marshal(v)
	}
	size := m.Size()
	if mem.IsBelowBufferPoolingThreshold(size) {
		buf := make([]byte, size)
		if _, err := m.MarshalToSizedBuffer(buf); err != nil {
			return nil, fmt.Errorf("marshal %T: %w", v, err)
		}
		return mem.BufferSlice{mem.SliceBuffer(buf)}, nil
	}
	pool := mem.DefaultBufferPool()
	buf := pool.Get(size)
	if _, err := m.MarshalToSizedBuffer((*buf)[:size]); err != nil {
		pool.Put(buf)
		return nil, fmt.Errorf("marshal %T: %w", v, err)
	}
	return mem.BufferSlice{mem.NewBuffer(buf, pool)}, nil
}

// Unmarshal decodes data into v: in place when it arrived in one piece, else gathered into a scratch
// buffer. etcd's generated Unmarshal copies every byte field it keeps, so the buffer is reused at once.
// It merges into what v holds, so v is reset first: a message received into twice holds the second
// answer only, as with gRPC's codec.
func (c etcdCodec) Unmarshal(data mem.BufferSlice, v any) error {
	m, ok := v.(gogoMessage)
	if !ok {
		return c.fallback.Unmarshal(data, v)
	}
	m.Reset()
	var err error
	if len(data) == 1 {
		err = m.Unmarshal(data[0].ReadOnlyData())
	} else {
		n := data.Len()
		buf, _ := c.scratch.Get().(*[]byte)
		if buf == nil || cap(*buf) < n {
			buf = new([]byte)
			*buf = make([]byte, n)
		}
		b := (*buf)[:n]
		data.CopyTo(b)
		err = m.Unmarshal(b)
		c.scratch.Put(buf)
	}
	if err != nil {
		return fmt.Errorf("unmarshal %T: %w", v, err)
	}
	return nil
}

// Name is empty so that gRPC sends no content subtype: requests say "application/grpc", as those of
// etcd's own client do, and the server decodes them with its default codec.
func (etcdCodec) Name() string { return "" }

// Flow-control windows of connections that do not probe bandwidth: larger than any response etcd sends by
// default (its request limit is 1.5 MiB, a page of a list a few MiB), so that a reply never waits for a
// window update.
const (
	fixedStreamWindow = 8 << 20
	fixedConnWindow   = 64 << 20
)

// dialOptions are the gRPC options of the runner's connections. Without probeBandwidth the windows are
// fixed: gRPC's default (dynamic windows) pings the server whenever data arrives and no ping is out, to
// estimate the bandwidth-delay product, which on a busy connection is a ping and its answer for every few
// requests, work for both ends that etcd's load does not ask for.
func dialOptions(probeBandwidth bool) []grpc.DialOption {
	opts := []grpc.DialOption{grpc.WithDefaultCallOptions(grpc.ForceCodecV2(newEtcdCodec()))}
	if !probeBandwidth {
		opts = append(opts, grpc.WithInitialWindowSize(fixedStreamWindow), grpc.WithInitialConnWindowSize(fixedConnWindow))
	}
	return opts
}
