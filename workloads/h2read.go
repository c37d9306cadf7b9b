package workloads

import (
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// done reports whether the connection is closed.
func (t *h2Transport) done() bool { return t.closed.Load() }

// close ends the connection: every call in flight fails with codes.Unavailable, and no new one starts.
func (t *h2Transport) close(err error) {
	t.smu.Lock()
	if t.err == nil {
		t.err = err
	}
	calls := t.streams
	t.streams = map[uint32]*h2Call{}
	t.smu.Unlock()
	if t.closed.CompareAndSwap(false, true) {
		t.conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond)) // TLS says goodbye; a paused server is not waited for
		t.conn.Close()
	}
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
			var se http2.StreamError
			if errors.As(err, &se) { // one stream's answer was malformed; the connection is fine
				t.complete(se.StreamID, status.Errorf(codes.Internal, "malformed answer: %v", se))
				t.lockWrites()
				t.fr.WriteRSTStream(se.StreamID, se.Code)
				t.bw.Flush()
				t.wmu.Unlock()
				continue
			}
			t.close(err)
			return
		}
		t.lastRead.Store(time.Now().UnixNano())
		switch f := f.(type) {
		case *http2.MetaHeadersFrame:
			t.onHeaders(f)
		case *http2.DataFrame:
			connUnacked += int64(f.Length)
			streamInc := t.onData(f)
			if connUnacked > fixedConnWindow/4 || streamInc > 0 {
				t.lockWrites()
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
		case *http2.RSTStreamFrame:
			t.complete(f.StreamID, resetError(f.ErrCode))
		case *http2.SettingsFrame:
			if f.IsAck() {
				continue
			}
			t.lockWrites()
			f.ForeachSetting(func(s http2.Setting) error {
				switch s.ID {
				case http2.SettingInitialWindowSize:
					t.streamWindow = int64(s.Val)
				case http2.SettingMaxConcurrentStreams:
					t.smu.Lock()
					t.maxStreams = int(min(s.Val, 1<<31))
					t.smu.Unlock()
				}
				return nil
			})
			t.fr.WriteSettingsAck()
			t.bw.Flush()
			t.wmu.Unlock()
			select {
			case <-t.ready:
			default:
				close(t.ready)
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				t.lockWrites()
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

// onData adds a DATA frame to its call's answer and returns the stream window to give back (0: none yet).
func (t *h2Transport) onData(f *http2.DataFrame) (streamInc uint32) {
	t.smu.Lock()
	call := t.streams[f.StreamID]
	if call != nil {
		call.data = append(call.data, f.Data()...)
		call.recvUnacked += int64(f.Length)
		if call.recvUnacked > fixedStreamWindow/2 && !f.StreamEnded() {
			streamInc, call.recvUnacked = uint32(call.recvUnacked), 0
		}
	}
	t.smu.Unlock()
	if call != nil && f.StreamEnded() {
		t.complete(f.StreamID, status.Error(codes.Internal, "the server ended the stream without trailers"))
	}
	return streamInc
}

// onHeaders reads a response's headers or trailers; trailers (or a trailers-only answer) end the call.
func (t *h2Transport) onHeaders(f *http2.MetaHeadersFrame) {
	var err error
	end := f.StreamEnded()
	t.smu.Lock()
	call := t.streams[f.StreamID]
	switch {
	case call == nil:
	case !call.headers && !end:
		call.headers = true
		if s := f.PseudoValue("status"); s != "200" {
			err, end = httpStatusError(s), true
		}
	default:
		for _, hf := range f.RegularFields() {
			switch hf.Name {
			case "grpc-status":
				n, perr := strconv.Atoi(hf.Value)
				if perr != nil {
					n = int(codes.Unknown)
				}
				call.code, call.gotStatus = codes.Code(n), true
			case "grpc-message":
				call.msg = decodeGRPCMessage(hf.Value)
			}
		}
		if !call.headers && !call.gotStatus {
			if s := f.PseudoValue("status"); s != "200" {
				err = httpStatusError(s)
			}
		}
	}
	t.smu.Unlock()
	if call != nil && end {
		t.complete(f.StreamID, err)
	}
}

// complete ends a call with err (nil: its answer is complete).
func (t *h2Transport) complete(id uint32, err error) {
	call, ok := t.take(id)
	if !ok {
		return
	}
	call.err = err
	call.done <- struct{}{}
}

// take removes a call from streams; whoever takes it signals it. A connection the server is leaving is
// closed when its last call is taken.
func (t *h2Transport) take(id uint32) (*h2Call, bool) {
	t.smu.Lock()
	call, ok := t.streams[id]
	delete(t.streams, id)
	idle := t.goingAway && len(t.streams) == 0
	t.smu.Unlock()
	if idle {
		t.close(errors.New("the server went away"))
	}
	return call, ok
}

// goAway stops new calls on the connection and sends those the server will not answer elsewhere: it has
// not processed them. The connection closes when the calls it will answer have ended.
func (t *h2Transport) goAway(last uint32, code http2.ErrCode) {
	t.retire(fmt.Errorf("server going away: %v", code))
	t.smu.Lock()
	var lost []uint32
	for id := range t.streams {
		if id > last {
			lost = append(lost, id)
		}
	}
	t.smu.Unlock()
	for _, id := range lost {
		t.complete(id, fmt.Errorf("server going away (%v): %w", code, errNotSent))
	}
}

// resetError is the error of a stream the server reset, with gRPC's codes; a refused stream was not
// processed, and is sent again elsewhere.
func resetError(code http2.ErrCode) error {
	c := codes.Internal
	switch code {
	case http2.ErrCodeRefusedStream:
		return fmt.Errorf("stream refused by the server: %w", errNotSent)
	case http2.ErrCodeCancel:
		c = codes.Canceled
	case http2.ErrCodeFlowControl, http2.ErrCodeEnhanceYourCalm:
		c = codes.ResourceExhausted
	case http2.ErrCodeInadequateSecurity:
		c = codes.PermissionDenied
	}
	return status.Errorf(c, "stream reset by the server: %v", code)
}

// httpStatusError is the error of an answer whose HTTP status is not 200, with gRPC's codes.
func httpStatusError(s string) error {
	c := codes.Unknown
	switch s {
	case "400":
		c = codes.Internal
	case "401":
		c = codes.Unauthenticated
	case "403":
		c = codes.PermissionDenied
	case "404":
		c = codes.Unimplemented
	case "429", "502", "503", "504":
		c = codes.Unavailable
	}
	return status.Errorf(c, "unexpected HTTP status %s", s)
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
