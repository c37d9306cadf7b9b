package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"net/textproto"
	"strings"
	"time"
)

// headLimit bounds how much of a connection is buffered to find the first request's headers.
const headLimit = 16 << 10

// headTimeout bounds how long the proxy waits for a first request head before forwarding blindly.
const headTimeout = 2 * time.Second

// readHead reads the beginning of the connection until the end of the first request's header block (or
// headLimit bytes, EOF or headTimeout) and extracts the sender and path. The bytes read are returned to be
// forwarded first.
//
// It gives up as soon as the bytes cannot begin an HTTP/1 request: a TLS client (a member serving clients
// over TLS behind a client proxy) sends its ClientHello and then waits for the server's answer, which the
// proxy would otherwise hold back for headTimeout, longer than a status probe waits for a whole answer.
func (p *Proxy) readHead(c net.Conn, info *Conn) []byte {
	_ = c.SetReadDeadline(time.Now().Add(headTimeout))
	defer func() { _ = c.SetReadDeadline(time.Time{}) }()
	var buf []byte
	chunk := make([]byte, 4096)
	for len(buf) < headLimit {
		n, err := c.Read(chunk)
		buf = append(buf, chunk[:n]...)
		if i := bytes.Index(buf, []byte("\r\n\r\n")); i >= 0 {
			parseHead(buf[:i+4], info)
			return buf
		}
		if err != nil || !mayBeRequest(buf) {
			break
		}
	}
	return buf
}

// mayBeRequest reports whether b can be the beginning of an HTTP/1 request: a method (an RFC 9110 token)
// followed by a space. A TLS record (its first byte is 0x16) or any other binary protocol fails at once.
func mayBeRequest(b []byte) bool {
	for i, ch := range b {
		if ch == ' ' {
			return i > 0
		}
		if !isTokenChar(ch) {
			return false
		}
	}
	return true
}

func isTokenChar(ch byte) bool {
	switch {
	case 'a' <= ch && ch <= 'z', 'A' <= ch && ch <= 'Z', '0' <= ch && ch <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", ch) >= 0
}

func parseHead(head []byte, info *Conn) {
	r := textproto.NewReader(bufio.NewReader(bytes.NewReader(head)))
	line, err := r.ReadLine()
	if err != nil {
		return
	}
	// "GET /raft/stream/msgappv2/8e9e05c52164694d HTTP/1.1"
	if fields := bytes.Fields([]byte(line)); len(fields) >= 2 {
		info.Path = string(fields[1])
	}
	hdr, err := r.ReadMIMEHeader()
	if err != nil && !errors.Is(err, io.EOF) {
		return
	}
	info.From = hdr.Get(SenderHeader)
}
