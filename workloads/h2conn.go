package workloads

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/api/v3/version"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Frame and header-table sizes of the unary connection (its flow-control windows are the runner's gRPC
// connections', fixedStreamWindow and fixedConnWindow).
const (
	h2MaxFrame      = 16384 // the protocol's default; servers may allow more, requests here stay below it
	h2HeaderTableSz = 4096
)

// h2Transport is one HTTP/2 client connection.
type h2Transport struct {
	conn      net.Conn
	scheme    string
	authority string

	wmu     sync.Mutex // guards everything written: fr's writes, bw, enc, hbuf, nextID, sendWindow
	bw      *bufio.Writer
	fr      *http2.Framer
	enc     *hpack.Encoder
	hbuf    bytes.Buffer
	nextID  uint32
	waiting atomic.Int32 // writers between wanting wmu and finishing: the last one flushes

	sendWindow   int64         // connection-level window for what we send (wmu)
	streamWindow int64         // the server's initial window per stream (wmu)
	ready        chan struct{} // closed by the reader at the server's first SETTINGS

	writeDeadline time.Time // of conn, moved forward as writes go (wmu)

	smu        sync.Mutex // guards streams, err, goingAway and every call in streams
	streams    map[uint32]*h2Call
	maxStreams int   // the server's limit on concurrent streams: calls beyond it go to the fallback
	err        error // set once the connection is lost or going away: no new calls
	goingAway  bool  // the server sent GOAWAY: closed when its last stream ends
	closed     atomic.Bool

	lastRead  atomic.Int64 // when the reader last got a frame (UnixNano)
	lastProbe atomic.Int64 // when the last ping to tell a silent server from a slow one went (UnixNano)
}

// h2Call is one call in flight. While it is in streams, only the reader writes it, holding smu; whoever
// takes it out of streams (the reader completing it, close, or its caller giving up) signals done once.
type h2Call struct {
	done        chan struct{}
	data        []byte
	headers     bool
	code        codes.Code
	msg         string
	gotStatus   bool
	err         error
	recvUnacked int64
}

var h2Calls = sync.Pool{New: func() any { return &h2Call{done: make(chan struct{}, 1)} }}

func dialH2(ctx context.Context, ep unaryEndpoint, tlsConfig *tls.Config) (*h2Transport, error) {
	dctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(dctx, ep.network, ep.addr)
	if err != nil {
		return nil, err
	}
	scheme := "http"
	if ep.secure {
		if tlsConfig == nil {
			conn.Close()
			return nil, errors.New("https endpoint without TLS settings")
		}
		cfg := tlsConfig.Clone()
		if cfg.ServerName == "" {
			host, _, err := net.SplitHostPort(ep.authority)
			if err != nil {
				host = ep.authority // a unix socket's
			}
			cfg.ServerName = host
		}
		tc := tls.Client(conn, cfg)
		if err := tc.HandshakeContext(dctx); err != nil {
			conn.Close()
			return nil, err
		}
		if tc.ConnectionState().NegotiatedProtocol != "h2" {
			tc.Close()
			return nil, errors.New("server did not negotiate h2")
		}
		conn, scheme = tc, "https"
	}
	t := &h2Transport{
		conn: conn, scheme: scheme, authority: ep.authority,
		bw: bufio.NewWriterSize(conn, 32<<10), nextID: 1,
		sendWindow: 65535, streamWindow: 65535,
		streams: make(map[uint32]*h2Call), maxStreams: 1 << 31, ready: make(chan struct{}),
	}
	t.fr = http2.NewFramer(t.bw, bufio.NewReaderSize(conn, 32<<10))
	t.fr.ReadMetaHeaders = hpack.NewDecoder(h2HeaderTableSz, nil)
	t.fr.MaxHeaderListSize = 16 << 20
	t.enc = hpack.NewEncoder(&t.hbuf)
	if _, err := io.WriteString(t.bw, http2.ClientPreface); err != nil {
		conn.Close()
		return nil, err
	}
	err = t.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: fixedStreamWindow})
	if err == nil {
		err = t.fr.WriteWindowUpdate(0, fixedConnWindow-65535)
	}
	if err == nil {
		err = t.bw.Flush()
	}
	if err != nil {
		conn.Close()
		return nil, err
	}
	t.lastRead.Store(time.Now().UnixNano())
	go t.readLoop()
	// The connection is ready when the server has spoken: a paused process accepts connections (its
	// kernel does) and answers nothing, and a server that drops connections at once must not count as up.
	select {
	case <-t.ready:
		return t, nil
	case <-dctx.Done():
		t.close(errors.New("no settings from the server"))
		return nil, fmt.Errorf("no HTTP/2 settings from %s within the dial timeout: %w", ep.addr, dctx.Err())
	}
}

func (t *h2Transport) usable() bool {
	t.smu.Lock()
	defer t.smu.Unlock()
	return t.err == nil && t.nextID < 1<<30
}

// retire stops new calls on the connection, for reason, and closes it when its last call ends (or now,
// with none).
func (t *h2Transport) retire(reason error) {
	t.smu.Lock()
	if t.err == nil {
		t.err = reason
	}
	t.goingAway = true
	idle := len(t.streams) == 0
	t.smu.Unlock()
	if idle {
		t.close(reason)
	}
}

// invoke sends one request and waits for its answer, or for ctx.
func (t *h2Transport) invoke(ctx context.Context, method string, in, out gogoMessage) error {
	if err := ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	size := in.Size()
	if size+5 > h2MaxFrame || metadataSize(md) > h2MaxMetadata {
		return errTooLarge
	}
	call := h2Calls.Get().(*h2Call)
	defer h2Calls.Put(call)
	call.reset()
	frame := slices.Grow(call.data[:0], 5+size)[:5+size] // the message's prefix: uncompressed, its length
	frame[0] = 0
	binary.BigEndian.PutUint32(frame[1:5], uint32(size))
	if _, err := in.MarshalToSizedBuffer(frame[5:]); err != nil {
		return status.Errorf(codes.Internal, "marshal %T: %v", in, err)
	}
	call.data = frame[:0]

	t.waiting.Add(1)
	t.lockWrites()
	id, err := t.send(ctx, method, md, frame, call)
	var flushErr error
	if t.waiting.Add(-1) == 0 { // the last writer of a burst flushes what all of them wrote
		flushErr = t.bw.Flush()
	}
	t.wmu.Unlock()
	if flushErr != nil {
		t.close(flushErr)
	}
	if errors.Is(err, errTooLarge) || errors.Is(err, errNotSent) {
		return err
	}
	if err != nil {
		t.close(err)
	}
	select {
	case <-call.done:
	case <-ctx.Done():
		probe := errors.Is(ctx.Err(), context.DeadlineExceeded) && t.startProbe()
		_, mine := t.take(id)
		if !mine && !probe {
			<-call.done // the reader is completing it
			return status.FromContextError(ctx.Err()).Err()
		}
		// The ping goes before the reset: a server with no stream open counts any ping as abuse.
		t.lockWrites()
		var err error
		if probe {
			err = t.fr.WritePing(false, [8]byte{'p', 'r', 'o', 'b', 'e'})
		}
		if mine && err == nil {
			err = t.fr.WriteRSTStream(id, http2.ErrCodeCancel)
		}
		if err == nil {
			err = t.bw.Flush()
		}
		t.wmu.Unlock()
		if err != nil {
			t.close(err)
		}
		if !mine {
			<-call.done
		}
		return status.FromContextError(ctx.Err()).Err()
	}
	switch {
	case call.err != nil:
		return call.err
	case !call.gotStatus:
		return status.Error(codes.Internal, "the server closed the stream without a grpc-status")
	case call.code != codes.OK:
		return status.Error(call.code, call.msg)
	}
	if len(call.data) < 5 || call.data[0] != 0 {
		return status.Error(codes.Internal, "malformed response message")
	}
	n := int(binary.BigEndian.Uint32(call.data[1:5]))
	if len(call.data) != 5+n {
		return status.Errorf(codes.Internal, "response message of %d bytes announced %d", len(call.data)-5, n)
	}
	out.Reset()
	if err := out.Unmarshal(call.data[5:]); err != nil {
		return status.Errorf(codes.Internal, "unmarshal %T: %v", out, err)
	}
	return nil
}

// send writes the request's HEADERS and DATA frames, holding wmu; it registers the call first, so that
// the answer always finds it.
func (t *h2Transport) send(ctx context.Context, method string, md metadata.MD, frame []byte, call *h2Call) (uint32, error) {
	if int64(len(frame)) > t.sendWindow || int64(len(frame)) > t.streamWindow {
		return 0, errTooLarge
	}
	t.smu.Lock()
	if t.err != nil || len(t.streams) >= t.maxStreams {
		t.smu.Unlock()
		return 0, errNotSent
	}
	id := t.nextID
	t.nextID += 2
	t.streams[id] = call
	t.smu.Unlock()

	t.hbuf.Reset()
	t.field(":method", "POST")
	t.field(":scheme", t.scheme)
	t.field(":path", method)
	t.field(":authority", t.authority)
	t.field("content-type", "application/grpc")
	t.field("user-agent", "chaosbench grpc-go/"+grpc.Version)
	t.field("te", "trailers")
	t.field(rpctypes.MetadataClientAPIVersionKey, version.APIVersion) // as etcd's client sends it
	if dl, ok := ctx.Deadline(); ok {
		t.field("grpc-timeout", grpcTimeout(time.Until(dl)))
	}
	for k, vs := range md {
		if reservedHeader(k) {
			continue
		}
		for _, v := range vs {
			if strings.HasSuffix(k, "-bin") {
				v = base64.RawStdEncoding.EncodeToString([]byte(v))
			}
			t.field(k, v)
		}
	}
	if err := t.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: t.hbuf.Bytes(), EndHeaders: true}); err != nil {
		return id, err
	}
	t.sendWindow -= int64(len(frame))
	return id, t.fr.WriteData(id, true, frame)
}

func (t *h2Transport) field(name, value string) {
	t.enc.WriteField(hpack.HeaderField{Name: name, Value: value})
}

// Silent connections: a call that timed out on a connection from which nothing arrived for probeAfter
// sends a ping (at most one per probeEvery: etcd's server counts pings closer than 5 s apart that come with
// no data from it as abuse, and closes the connection after three), and the connection is dropped when
// nothing arrives for probeWait after it (the server is paused, or cut off by a partition); the next call
// dials the next endpoint. gRPC's connections find such a server by their keepalive pings, which etcd's
// client enables, and its round robin sends the next calls to the others.
const (
	probeAfter = time.Second
	probeWait  = time.Second
	probeEvery = 10 * time.Second
	// writeTimeout bounds a write to the connection: only a server that stopped reading (a paused
	// process, a black hole) lets the socket's buffer fill for that long.
	writeTimeout = 5 * time.Second
)

// startProbe decides, after a call timed out, whether to ping the server (the caller writes the ping),
// and arms the check of its answer.
func (t *h2Transport) startProbe() bool {
	now := time.Now().UnixNano()
	last := t.lastProbe.Load()
	if now-t.lastRead.Load() < int64(probeAfter) || (last != 0 && now-last < int64(probeEvery)) || !t.lastProbe.CompareAndSwap(last, now) {
		return false
	}
	time.AfterFunc(probeWait, func() {
		if t.lastRead.Load() < now {
			t.close(fmt.Errorf("no answer from the server within %v of a ping", probeWait))
		}
	})
	return true
}

// lockWrites takes wmu and moves the connection's write deadline forward when half of it has passed.
func (t *h2Transport) lockWrites() {
	t.wmu.Lock()
	if now := time.Now(); now.Add(writeTimeout / 2).After(t.writeDeadline) {
		t.writeDeadline = now.Add(writeTimeout)
		t.conn.SetWriteDeadline(t.writeDeadline)
	}
}

// h2MaxMetadata bounds the metadata a call may carry over the unary connection (the header block must fit
// one frame); calls with more go to the fallback.
const h2MaxMetadata = 8 << 10

func metadataSize(md metadata.MD) int {
	n := 0
	for k, vs := range md {
		for _, v := range vs {
			n += len(k) + len(v)*4/3 + 32
		}
	}
	return n
}

// reservedHeader: headers the connection writes itself, which gRPC also leaves out of a call's metadata.
func reservedHeader(k string) bool {
	switch k {
	case "content-type", "user-agent", "te", "grpc-timeout", "grpc-encoding", "grpc-accept-encoding", "grpc-message", "grpc-status", rpctypes.MetadataClientAPIVersionKey:
		return true
	}
	return strings.HasPrefix(k, ":")
}

// grpcTimeout writes d as gRPC's timeout header does: at most 8 digits and a unit.
func grpcTimeout(d time.Duration) string {
	if d <= 0 {
		return "0n"
	}
	for _, u := range []struct {
		unit string
		d    time.Duration
	}{{"n", time.Nanosecond}, {"u", time.Microsecond}, {"m", time.Millisecond}, {"S", time.Second}, {"M", time.Minute}, {"H", time.Hour}} {
		if v := (d + u.d - 1) / u.d; v < 1e8 {
			return strconv.FormatInt(int64(v), 10) + u.unit
		}
	}
	return "99999999H"
}

// reset makes a pooled call new, keeping its channel (every path that signals it also receives) and buffer.
func (c *h2Call) reset() { *c = h2Call{done: c.done, data: c.data[:0]} }
