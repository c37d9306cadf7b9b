// Package proxy is the TCP proxy that sits in front of each etcd member's peer listener. Members advertise
// the proxy's address, so all raft traffic to a member flows through it, and the cluster (and the faults
// package) can stall, slow or cut individual links.
//
// etcd's peer protocol is HTTP/1.1: raft streams, pipelines and snapshots carry the sender's member id in the
// X-Server-From header, so the proxy reads the head of the first request on each connection to learn which
// member is talking. Connections without the header (version probes, lease forwarding) are reported with an
// empty sender; Identify can resolve them by other means.
//
// The proxy never drops bytes of a stream: raft messages are length-framed on plaintext TCP and a lost
// chunk would corrupt the stream rather than model a lost packet.
package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"sync"
	"time"
)

// SenderHeader is the HTTP header in which etcd's rafthttp names the sending member (hex member id).
const SenderHeader = "X-Server-From"

// headLimit bounds how much of a connection is buffered to find the first request's headers.
const headLimit = 16 << 10

// headTimeout bounds how long the proxy waits for a first request head before forwarding blindly.
const headTimeout = 2 * time.Second

// Direction is one half of a proxied connection.
type Direction int

// Directions of a proxied connection: Inbound carries bytes from the connecting peer to the member behind
// the proxy (requests, pipeline messages); Outbound carries the member's bytes back (responses, and raft
// stream messages, which etcd writes in the response body of a stream the other side opened).
const (
	Inbound Direction = iota
	Outbound
)

func (d Direction) String() string {
	if d == Inbound {
		return "inbound"
	}
	return "outbound"
}

// Conn describes one proxied connection.
type Conn struct {
	// From is the sender's member id as sent in X-Server-From, or what Identify returned; "" if unknown.
	From string
	// Path is the path of the first request on the connection (for example /raft/stream/msgappv2/<id>).
	Path   string
	Remote net.Addr
	Opened time.Time
	// Closed is closed when the connection is; a Shape function that blocks must return when it is.
	Closed <-chan struct{}
}

// Options configures a Proxy.
type Options struct {
	// Identify, when set, names the sender of a connection whose first request has no X-Server-From header.
	Identify func(remote net.Addr) string
	// Shape, when set, is consulted for every chunk of bytes before it is forwarded: it may sleep (delay,
	// bandwidth), block until a link heals (blackhole), or return an error to reset the connection.
	Shape func(c *Conn, d Direction, n int) error
	// Admit, when set, decides whether a new connection is accepted; an error refuses it (closes it).
	Admit func(c *Conn) error
}

// Proxy forwards connections accepted on its listener to a target address.
type Proxy struct {
	ln     net.Listener
	target string
	opts   Options

	mu     sync.Mutex
	conns  map[*link]struct{}
	closed bool
	wg     sync.WaitGroup
}

type link struct {
	info       Conn
	downstream net.Conn
	upstream   net.Conn
	closed     chan struct{}
	closeOnce  sync.Once
}

// Listen starts a proxy on addr (use "127.0.0.1:0" for a free port) that forwards to target.
func Listen(addr, target string, opts Options) (*Proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("proxy listen on %s: %w", addr, err)
	}
	p := &Proxy{ln: ln, target: target, opts: opts, conns: map[*link]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the proxy's listening address.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target returns the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// Conns returns the connections currently open through the proxy.
func (p *Proxy) Conns() []Conn {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Conn, 0, len(p.conns))
	for l := range p.conns {
		out = append(out, l.info)
	}
	return out
}

// Reset closes every open connection for which match returns true, so that the peers reconnect.
// It returns how many were closed.
func (p *Proxy) Reset(match func(Conn) bool) int {
	p.mu.Lock()
	var victims []*link
	for l := range p.conns {
		if match(l.info) {
			victims = append(victims, l)
		}
	}
	p.mu.Unlock()
	for _, l := range victims {
		l.close()
	}
	return len(victims)
}

// Close stops accepting, closes every connection and waits for the proxy's goroutines.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.Reset(func(Conn) bool { return true })
	p.wg.Wait()
	return err
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Add(1)
		go p.serve(c)
	}
}

func (p *Proxy) serve(down net.Conn) {
	defer p.wg.Done()
	l := &link{downstream: down, closed: make(chan struct{})}
	l.info = Conn{Remote: down.RemoteAddr(), Opened: time.Now(), Closed: l.closed}
	head := p.readHead(down, &l.info)
	if l.info.From == "" && p.opts.Identify != nil {
		l.info.From = p.opts.Identify(down.RemoteAddr())
	}
	if p.opts.Admit != nil {
		if err := p.opts.Admit(&l.info); err != nil {
			down.Close()
			return
		}
	}
	up, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		down.Close()
		return
	}
	l.upstream = up
	if !p.track(l) {
		l.close()
		return
	}
	defer p.untrack(l)

	done := make(chan bool, 2)
	go func() { done <- p.pipe(l, Inbound, up, io.MultiReader(bytes.NewReader(head), down)) }()
	go func() { done <- p.pipe(l, Outbound, down, up) }()
	// A clean end of one direction is passed on as a half-close and the other direction may go on; an
	// error on either side tears the whole connection down.
	if clean := <-done; !clean {
		l.close()
	}
	<-done
	l.close()
}

// readHead reads the beginning of the connection until the end of the first request's header block (or
// headLimit bytes, EOF or headTimeout) and extracts the sender and path. The bytes read are returned to be
// forwarded first.
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
		if err != nil {
			break
		}
	}
	return buf
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

// pipe copies src to dst until src ends; it reports whether src ended cleanly (EOF), in which case dst is
// half-closed.
func (p *Proxy) pipe(l *link, d Direction, dst net.Conn, src io.Reader) bool {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if p.opts.Shape != nil {
				if serr := p.opts.Shape(&l.info, d, n); serr != nil {
					return false
				}
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return false
			}
		}
		if err != nil {
			if !errors.Is(err, io.EOF) {
				return false
			}
			if cw, ok := dst.(interface{ CloseWrite() error }); ok {
				_ = cw.CloseWrite()
			}
			return true
		}
	}
}

func (p *Proxy) track(l *link) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return false
	}
	p.conns[l] = struct{}{}
	return true
}

func (p *Proxy) untrack(l *link) {
	p.mu.Lock()
	delete(p.conns, l)
	p.mu.Unlock()
}

func (l *link) close() {
	l.closeOnce.Do(func() {
		close(l.closed)
		l.downstream.Close()
		if l.upstream != nil {
			l.upstream.Close()
		}
	})
}
