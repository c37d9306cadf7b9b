package workloads

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// HTTP/2 settings of the unary connection: the same fixed windows as the runner's gRPC connections.
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

	sendWindow   int64 // connection-level window for what we send (wmu)
	streamWindow int64 // the server's initial window per stream (wmu)

	smu     sync.Mutex // guards streams, err
	streams map[uint32]*h2Call
	err     error // set once the connection is lost or going away: no new calls

	lastRead atomic.Int64 // when the reader last got a frame (UnixNano)
	probing  atomic.Bool  // a ping is out to tell a silent server from a slow one
}

// h2Call is one call in flight; the reader fills it and signals done.
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
			host, _, _ := net.SplitHostPort(ep.authority)
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
		streams: make(map[uint32]*h2Call),
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
	return t, nil
}

func (t *h2Transport) usable() bool {
	t.smu.Lock()
	defer t.smu.Unlock()
	return t.err == nil && t.nextID < 1<<30
}

// invoke sends one request and waits for its answer, or for ctx.
func (t *h2Transport) invoke(ctx context.Context, method string, in, out gogoMessage) error {
	size := in.Size()
	if size+5 > h2MaxFrame {
		return errTooLarge
	}
	call := h2Calls.Get().(*h2Call)
	defer h2Calls.Put(call)
	call.reset()
	frame := append(call.data[:0], 0, 0, 0, 0, 0)
	binary.BigEndian.PutUint32(frame[1:], uint32(size))
	frame = append(frame, make([]byte, size)...)[:5+size]
	if _, err := in.MarshalToSizedBuffer(frame[5:]); err != nil {
		return status.Errorf(codes.Internal, "marshal %T: %v", in, err)
	}
	call.data = frame[:0]

	t.waiting.Add(1)
	t.wmu.Lock()
	id, err := t.send(ctx, method, frame, call)
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
		t.smu.Lock()
		_, mine := t.streams[id]
		delete(t.streams, id)
		t.smu.Unlock()
		if !mine {
			<-call.done // the reader is completing it
		} else {
			t.wmu.Lock()
			if t.fr.WriteRSTStream(id, http2.ErrCodeCancel) == nil {
				t.bw.Flush()
			}
			t.wmu.Unlock()
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.probe()
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
func (t *h2Transport) send(ctx context.Context, method string, frame []byte, call *h2Call) (uint32, error) {
	if int64(len(frame)) > t.sendWindow || int64(len(frame)) > t.streamWindow {
		return 0, errTooLarge
	}
	t.smu.Lock()
	if t.err != nil {
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
	if dl, ok := ctx.Deadline(); ok {
		t.field("grpc-timeout", grpcTimeout(time.Until(dl)))
	}
	if md, ok := metadata.FromOutgoingContext(ctx); ok {
		for k, vs := range md {
			for _, v := range vs {
				t.field(k, v)
			}
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
// sends a ping, and the connection is dropped when nothing arrives for probeWait after it (the server is
// paused, or cut off by a partition); the next call dials the next endpoint. gRPC's connections find such
// a server by their keepalive pings, which etcd's client enables, and its round robin sends the next calls
// to the others.
const (
	probeAfter = time.Second
	probeWait  = time.Second
)

// probe checks, after a call timed out, that the server still answers.
func (t *h2Transport) probe() {
	if time.Since(time.Unix(0, t.lastRead.Load())) < probeAfter || !t.probing.CompareAndSwap(false, true) {
		return
	}
	sent := time.Now().UnixNano()
	t.wmu.Lock()
	err := t.fr.WritePing(false, [8]byte{'p', 'r', 'o', 'b', 'e'})
	if err == nil {
		err = t.bw.Flush()
	}
	t.wmu.Unlock()
	if err != nil {
		t.close(err)
		return
	}
	time.AfterFunc(probeWait, func() {
		t.probing.Store(false)
		if t.lastRead.Load() < sent {
			t.close(fmt.Errorf("no answer from the server within %v of a ping", probeWait))
		}
	})
}

// grpcTimeout writes d as gRPC's timeout header does: at most 8 digits and a unit.
func grpcTimeout(d time.Duration) string {
	if d <= 0 {
		return "1n"
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

func (c *h2Call) reset() {
	c.data, c.headers, c.code, c.msg, c.gotStatus, c.err, c.recvUnacked = c.data[:0], false, codes.OK, "", false, nil, 0
	select {
	case <-c.done:
	default:
	}
}

// close ends the connection: every call in flight fails with codes.Unavailable, and no new one starts.
func (t *h2Transport) close(err error) {
	t.smu.Lock()
	if t.err == nil {
		t.err = err
	}
	calls := t.streams
	t.streams = map[uint32]*h2Call{}
	t.smu.Unlock()
	t.conn.Close()
	for _, c := range calls {
		c.err = status.Error(codes.Unavailable, fmt.Sprintf("connection lost: %v", err))
		c.done <- struct{}{}
	}
}

// readLoop reads the server's frames until the connection fails, completing calls as their answers end.
func (t *h2Transport) readLoop() {
	var connUnacked int64
	for {
		f, err := t.fr.ReadFrame()
		if err != nil {
			t.close(err)
			return
		}
		t.lastRead.Store(time.Now().UnixNano())
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			t.onHeaders(f)
		case *http2.DataFrame:
			n := int64(f.Length)
			connUnacked += n
			t.smu.Lock()
			call := t.streams[f.StreamID]
			t.smu.Unlock()
			var streamInc uint32
			if call != nil {
				call.data = append(call.data, f.Data()...)
				if call.recvUnacked += n; call.recvUnacked > fixedStreamWindow/2 && !f.StreamEnded() {
					streamInc, call.recvUnacked = uint32(call.recvUnacked), 0
				}
			}
			if connUnacked > fixedConnWindow/4 || streamInc > 0 {
				t.wmu.Lock()
				if connUnacked > fixedConnWindow/4 {
					t.fr.WriteWindowUpdate(0, uint32(connUnacked))
					connUnacked = 0
				}
				if streamInc > 0 {
					t.fr.WriteWindowUpdate(f.StreamID, streamInc)
				}
				t.bw.Flush()
				t.wmu.Unlock()
			}
			if f.StreamEnded() {
				t.complete(f.StreamID, status.Error(codes.Internal, "the server ended the stream without trailers"))
			}
		case *http2.RSTStreamFrame:
			code := codes.Internal
			switch f.ErrCode {
			case http2.ErrCodeRefusedStream:
				code = codes.Unavailable
			case http2.ErrCodeCancel:
				code = codes.Canceled
			}
			t.complete(f.StreamID, status.Errorf(code, "stream reset by the server: %v", f.ErrCode))
		case *http2.SettingsFrame:
			if f.IsAck() {
				continue
			}
			t.wmu.Lock()
			f.ForeachSetting(func(s http2.Setting) error {
				if s.ID == http2.SettingInitialWindowSize {
					t.streamWindow = int64(s.Val)
				}
				return nil
			})
			t.fr.WriteSettingsAck()
			t.bw.Flush()
			t.wmu.Unlock()
		case *http2.PingFrame:
			if !f.IsAck() {
				t.wmu.Lock()
				t.fr.WritePing(true, f.Data)
				t.bw.Flush()
				t.wmu.Unlock()
			}
		case *http2.WindowUpdateFrame:
			if f.StreamID == 0 {
				t.wmu.Lock()
				t.sendWindow += int64(f.Increment)
				t.wmu.Unlock()
			}
		case *http2.GoAwayFrame:
			t.goAway(f.LastStreamID, f.ErrCode)
		}
	}
}

// onHeaders reads a response's headers or trailers; trailers (or a trailers-only answer) end the call.
func (t *h2Transport) onHeaders(f *http2.MetaHeadersFrame) {
	t.smu.Lock()
	call := t.streams[f.StreamID]
	t.smu.Unlock()
	if call == nil {
		return
	}
	if !call.headers && !f.StreamEnded() {
		call.headers = true
		if s := f.PseudoValue("status"); s != "200" {
			t.complete(f.StreamID, status.Errorf(codes.Unknown, "HTTP status %s", s))
		}
		return
	}
	if s := f.Fields; s != nil {
		for _, hf := range s {
			switch hf.Name {
			case "grpc-status":
				n, err := strconv.Atoi(hf.Value)
				if err != nil {
					n = int(codes.Unknown)
				}
				call.code, call.gotStatus = codes.Code(n), true
			case "grpc-message":
				call.msg = decodeGRPCMessage(hf.Value)
			}
		}
	}
	if f.StreamEnded() {
		t.complete(f.StreamID, nil)
	}
}

// complete ends a call with err (nil: its answer is complete).
func (t *h2Transport) complete(id uint32, err error) {
	t.smu.Lock()
	call := t.streams[id]
	delete(t.streams, id)
	t.smu.Unlock()
	if call == nil {
		return
	}
	call.err = err
	call.done <- struct{}{}
}

// goAway stops new calls on the connection and fails those the server will not answer.
func (t *h2Transport) goAway(last uint32, code http2.ErrCode) {
	t.smu.Lock()
	if t.err == nil {
		t.err = fmt.Errorf("server going away: %v", code)
	}
	var lost []uint32
	for id := range t.streams {
		if id > last {
			lost = append(lost, id)
		}
	}
	t.smu.Unlock()
	for _, id := range lost {
		t.complete(id, status.Errorf(codes.Unavailable, "server going away: %v", code))
	}
}

// decodeGRPCMessage undoes the percent-encoding of grpc-message.
func decodeGRPCMessage(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	if u, err := url.PathUnescape(s); err == nil {
		return u
	}
	return s
}
