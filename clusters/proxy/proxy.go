// Package proxy is the TCP proxy that sits in front of each etcd member's peer listener (and, when asked,
// its client listener). Members advertise the proxy's address, so all raft traffic to a member flows
// through it, and the cluster (and the faults package) can stall, slow or cut individual links.
//
// etcd's peer protocol is HTTP/1.1: raft streams, pipelines and snapshots carry the sender's member id in the
// X-Server-From header, so the proxy reads the head of the first request on each connection to learn which
// member is talking. Connections without the header (version probes, lease forwarding) are reported with an
// empty sender; Identify can resolve them by other means. Connections that do not open with an HTTP/1
// request (TLS, as clients of a TLS member speak) are forwarded as they are, without a path.
//
// Links are shaped by policies set at run time, per sender and direction (SetPolicy): stall (a blackhole
// whose bytes are delivered, in order, once it heals), delay with jitter, and a bandwidth limit; a sender can
// also be refused outright (SetRefused), and open connections reset (Reset). Bytes of a connection always
// arrive in the order they were sent.
//
// The proxy never drops bytes of a stream: raft messages are length-framed on plaintext TCP and a lost
// chunk would corrupt the stream rather than model a lost packet. A connection is either delivered whole or
// closed.
package proxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// SenderHeader is the HTTP header in which etcd's rafthttp names the sending member (hex member id).
const SenderHeader = "X-Server-From"

// AnySender is the sender key of a policy that applies to every sender without a policy of its own.
const AnySender = "*"

// chunkSize is the largest read forwarded as one piece; queueChunks bounds the chunks read ahead of the
// writer per direction (a stalled link holds at most queueChunks*chunkSize bytes before it pushes back on
// the sender, as a full TCP window would).
const (
	chunkSize   = 32 << 10
	queueChunks = 64
)

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
	// Identify, when set, names the sender of a connection whose first request has no X-Server-From header,
	// from the connection's remote address (the sender's) and local address (the proxy's).
	Identify func(remote, local net.Addr) string
	// Shape, when set, is consulted for every chunk of bytes before it is forwarded (after the policies): it
	// may sleep, block until the connection closes, or return an error to reset the connection.
	Shape func(c *Conn, d Direction, n int) error
	// Admit, when set, decides whether a new connection is accepted; an error refuses it (closes it).
	Admit func(c *Conn) error
	// Seed seeds the jitter of delays, so that a run's delays replay with its seed.
	Seed uint64
	// Log, when set, receives a line for every connection opened, refused or closed, and every change of
	// policy: the record of what a partition really cut.
	Log io.Writer
}

// Policy shapes one direction of the traffic of one sender.
type Policy struct {
	// Stall holds the bytes until the policy changes; they are then delivered, in order. This is a
	// blackhole as TCP sees it: nothing arrives, the sender's window fills, and the connection recovers
	// when the link heals (or the sender gives up on it first).
	Stall bool
	// Delay is added to every chunk, plus a uniform random Jitter in [0, Jitter). Chunks never overtake
	// each other: a connection's bytes keep their order whatever the jitter.
	Delay, Jitter time.Duration
	// Bandwidth limits the link to this many bytes per second, shared by all its connections (0: none).
	Bandwidth int64
}

func (p Policy) isZero() bool { return p == Policy{} }

type ruleKey struct {
	from string
	dir  Direction
}

type rule struct {
	Policy
	pace *pacer // shared by every connection of the link
}

// ruleSet is immutable once published; changes publish a new set and close the old one's changed channel,
// which wakes every writer waiting on a stall.
type ruleSet struct {
	links   map[ruleKey]*rule
	refused map[string]bool
	changed chan struct{}
}

func (rs *ruleSet) empty() bool { return len(rs.links) == 0 }

func (rs *ruleSet) lookup(from string, d Direction) *rule {
	if r, ok := rs.links[ruleKey{from, d}]; ok {
		return r
	}
	return rs.links[ruleKey{AnySender, d}]
}

func (rs *ruleSet) isRefused(from string) bool { return rs.refused[from] || rs.refused[AnySender] }

// Proxy forwards connections accepted on its listener to a target address.
type Proxy struct {
	ln     net.Listener
	target string
	opts   Options

	rules  atomic.Pointer[ruleSet]
	ruleMu sync.Mutex // serialises rule changes

	rngMu sync.Mutex
	rng   *rand.Rand

	logMu sync.Mutex

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
	held       [2]atomic.Int32 // per direction: 1 while the writer holds bytes back because of a stall
}

// Listen starts a proxy on addr (use "127.0.0.1:0" for a free port) that forwards to target.
func Listen(addr, target string, opts Options) (*Proxy, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("proxy listen on %s: %w", addr, err)
	}
	p := &Proxy{ln: ln, target: target, opts: opts, conns: map[*link]struct{}{},
		rng: rand.New(rand.NewPCG(opts.Seed, 0x70726f7879))} // "proxy"
	p.rules.Store(&ruleSet{changed: make(chan struct{})})
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

// SetPolicy shapes direction d of the traffic of sender from (a member id as in Conn.From, "" for
// unidentified senders, AnySender for every sender without its own policy). The zero Policy removes the
// shaping. It applies at once to open connections too; bytes already delayed keep their delivery time.
func (p *Proxy) SetPolicy(from string, d Direction, pol Policy) {
	p.update(func(rs *ruleSet) {
		k := ruleKey{from, d}
		if pol.isZero() {
			delete(rs.links, k)
			return
		}
		r := &rule{Policy: pol}
		if pol.Bandwidth > 0 {
			r.pace = &pacer{bytesPerSecond: pol.Bandwidth}
		}
		rs.links[k] = r
	})
}

// SetRefused refuses (or admits again) connections from sender from (AnySender: from everyone). Refusing
// also closes the sender's open connections, so that it sees its links fail at once, as after a reset.
func (p *Proxy) SetRefused(from string, refused bool) {
	p.update(func(rs *ruleSet) {
		if refused {
			rs.refused[from] = true
		} else {
			delete(rs.refused, from)
		}
	})
	if refused {
		p.Reset(func(c Conn) bool { return from == AnySender || c.From == from })
	}
}

// Heal removes every policy and refusal: stalled bytes flow again, delays end, refused senders may
// connect. It returns whether anything was in force.
func (p *Proxy) Heal() bool {
	var had bool
	p.update(func(rs *ruleSet) {
		had = len(rs.links) > 0 || len(rs.refused) > 0
		clear(rs.links)
		clear(rs.refused)
	})
	return had
}

// Shaped reports whether any policy or refusal is in force.
func (p *Proxy) Shaped() bool {
	rs := p.rules.Load()
	return len(rs.links) > 0 || len(rs.refused) > 0
}

// update publishes a modified copy of the rule set and wakes writers waiting on the old one.
func (p *Proxy) update(change func(*ruleSet)) {
	p.ruleMu.Lock()
	defer p.ruleMu.Unlock()
	defer func() {
		rs := p.rules.Load()
		var parts []string
		for k, r := range rs.links {
			parts = append(parts, fmt.Sprintf("%s/%s=%+v", k.from, k.dir, r.Policy))
		}
		for from := range rs.refused {
			parts = append(parts, from+"=refused")
		}
		slices.Sort(parts)
		p.logf("rules %v", parts)
	}()
	old := p.rules.Load()
	next := &ruleSet{links: make(map[ruleKey]*rule, len(old.links)+1), refused: make(map[string]bool, len(old.refused)+1),
		changed: make(chan struct{})}
	for k, v := range old.links {
		next.links[k] = v
	}
	for k, v := range old.refused {
		next.refused[k] = v
	}
	change(next)
	p.rules.Store(next)
	close(old.changed)
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
		l.info.From = p.opts.Identify(down.RemoteAddr(), down.LocalAddr())
	}
	if p.rules.Load().isRefused(l.info.From) {
		p.logf("refused from=%q path=%s remote=%s", l.info.From, l.info.Path, l.info.Remote)
		down.Close()
		return
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
	// A sender refused between the check above and track would keep this connection: look again.
	if p.rules.Load().isRefused(l.info.From) {
		p.logf("refused from=%q path=%s remote=%s", l.info.From, l.info.Path, l.info.Remote)
		l.close()
		return
	}
	p.logf("open from=%q path=%s remote=%s", l.info.From, l.info.Path, l.info.Remote)
	defer func() {
		p.logf("close from=%q path=%s remote=%s after %v", l.info.From, l.info.Path, l.info.Remote,
			time.Since(l.info.Opened).Round(time.Millisecond))
	}()

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

// chunk is a piece of one direction of a connection on its way through the proxy.
type chunk struct {
	buf *[]byte
	n   int
	due time.Time // zero: forward at once
}

var chunkPool = sync.Pool{New: func() any { b := make([]byte, chunkSize); return &b }}

// pipe copies src to dst until src ends; it reports whether src ended cleanly (EOF), in which case dst is
// half-closed. A reader goroutine stamps each chunk with its delivery time as it arrives (so a delay is a
// delay in flight, not a per-chunk sleep that would throttle throughput); this goroutine delivers the
// chunks in order, holding them while the link is stalled.
func (p *Proxy) pipe(l *link, d Direction, dst net.Conn, src io.Reader) bool {
	queue := make(chan chunk, queueChunks)
	var readErr error
	go func() {
		defer close(queue)
		for {
			bp := chunkPool.Get().(*[]byte)
			n, err := src.Read(*bp)
			if n > 0 {
				c := chunk{buf: bp, n: n}
				if rs := p.rules.Load(); !rs.empty() {
					if r := rs.lookup(l.info.From, d); r != nil && r.Delay+r.Jitter > 0 {
						c.due = time.Now().Add(r.Delay + p.jitter(r.Jitter))
					}
				}
				select {
				case queue <- c:
				case <-l.closed:
					chunkPool.Put(bp)
					readErr = net.ErrClosed
					return
				}
			} else {
				chunkPool.Put(bp)
			}
			if err != nil {
				readErr = err
				if errors.Is(err, io.EOF) && (l.held[Inbound].Load() != 0 || l.held[Outbound].Load() != 0) {
					// The peer hung up while the link holds its bytes: a blackholed connection whose
					// client gave up. Delivering its request after the heal would revive a conversation
					// nobody is waiting for, so the connection goes as a whole.
					l.close()
				}
				return
			}
		}
	}()
	ok := true
	for c := range queue {
		if ok {
			if ok = p.deliver(l, d, dst, c); !ok {
				l.close() // ends the reader too
			}
		}
		chunkPool.Put(c.buf)
	}
	if !ok || !errors.Is(readErr, io.EOF) {
		return false
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
	return true
}

// deliver forwards one chunk once its link is not stalled and its time has come; it reports false when
// the connection is gone.
func (p *Proxy) deliver(l *link, d Direction, dst net.Conn, c chunk) bool {
	for {
		rs := p.rules.Load()
		r := rs.lookup(l.info.From, d)
		if r == nil || !r.Stall {
			if r != nil && r.pace != nil {
				if wait := r.pace.reserve(c.n); wait > 0 && !sleep(wait, l.closed) {
					return false
				}
			}
			break
		}
		l.held[d].Store(1)
		select {
		case <-rs.changed:
			l.held[d].Store(0)
		case <-l.closed:
			return false
		}
	}
	if !c.due.IsZero() {
		if wait := time.Until(c.due); wait > 0 && !sleep(wait, l.closed) {
			return false
		}
	}
	if p.opts.Shape != nil {
		if err := p.opts.Shape(&l.info, d, c.n); err != nil {
			return false
		}
	}
	_, err := dst.Write((*c.buf)[:c.n])
	return err == nil
}

func (p *Proxy) logf(format string, args ...any) {
	if p.opts.Log == nil {
		return
	}
	p.logMu.Lock()
	defer p.logMu.Unlock()
	fmt.Fprintf(p.opts.Log, "%s %s\n", time.Now().UTC().Format("2006-01-02T15:04:05.000000Z"), fmt.Sprintf(format, args...))
}

func (p *Proxy) jitter(max time.Duration) time.Duration {
	if max <= 0 {
		return 0
	}
	p.rngMu.Lock()
	defer p.rngMu.Unlock()
	return time.Duration(p.rng.Int64N(int64(max)))
}

// sleep waits for d, or returns false when done closes first.
func sleep(d time.Duration, done <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}

// pacer spaces deliveries so that a link carries at most bytesPerSecond: each chunk takes its
// transmission time on a virtual wire that every connection of the link shares.
type pacer struct {
	bytesPerSecond int64
	mu             sync.Mutex
	free           time.Time // when the wire is free again
}

// reserve books n bytes on the wire and returns how long to wait until they have been "transmitted".
func (pc *pacer) reserve(n int) time.Duration {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	now := time.Now()
	start := pc.free
	if start.Before(now) {
		start = now
	}
	pc.free = start.Add(time.Duration(float64(n) / float64(pc.bytesPerSecond) * float64(time.Second)))
	return pc.free.Sub(now)
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
