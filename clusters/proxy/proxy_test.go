package proxy

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestProxyForwardsAndIdentifiesSender sends HTTP requests shaped like etcd's rafthttp through the proxy
// and checks that bodies arrive intact in both directions and that the sender is recognised.
func TestProxyForwardsAndIdentifiesSender(t *testing.T) {
	big := strings.Repeat("raft-message;", 100000) // larger than any single read
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s|%d|%s", r.URL.Path, len(body), big)
	}))
	defer srv.Close()

	var mu sync.Mutex
	var shaped = map[Direction]int{}
	p, err := Listen("127.0.0.1:0", strings.TrimPrefix(srv.URL, "http://"), Options{
		Shape: func(c *Conn, d Direction, n int) error {
			mu.Lock()
			shaped[d] += n
			mu.Unlock()
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()

	req, _ := http.NewRequest(http.MethodPost, "http://"+p.Addr()+"/raft", strings.NewReader(big))
	req.Header.Set(SenderHeader, "8e9e05c52164694d")
	client := &http.Client{Transport: &http.Transport{}}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	want := fmt.Sprintf("/raft|%d|%s", len(big), big)
	if string(body) != want {
		t.Fatalf("response corrupted through the proxy: got %d bytes, want %d", len(body), len(want))
	}

	// The keep-alive connection is still open: the proxy knows who sent on it.
	conns := p.Conns()
	if len(conns) != 1 || conns[0].From != "8e9e05c52164694d" || conns[0].Path != "/raft" {
		t.Fatalf("connections %+v, want one from 8e9e05c52164694d on /raft", conns)
	}
	mu.Lock()
	in, out := shaped[Inbound], shaped[Outbound]
	mu.Unlock()
	if in < len(big) || out < len(big) {
		t.Fatalf("shape saw %d inbound and %d outbound bytes, want at least %d each way", in, out, len(big))
	}
	if n := p.Reset(func(c Conn) bool { return c.From == "8e9e05c52164694d" }); n != 1 {
		t.Fatalf("reset closed %d connections, want 1", n)
	}
	waitFor(t, func() bool { return len(p.Conns()) == 0 })
}

func TestProxyUnknownSenderAndIdentify(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "v3.6") }))
	defer srv.Close()
	p, err := Listen("127.0.0.1:0", strings.TrimPrefix(srv.URL, "http://"), Options{
		Identify: func(net.Addr, net.Addr) string { return "from-proc" },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	resp, err := http.Get("http://" + p.Addr() + "/version")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	conns := p.Conns()
	if len(conns) != 1 || conns[0].From != "from-proc" {
		t.Fatalf("connections %+v, want one identified as from-proc", conns)
	}
}

func TestProxyAdmitRefuses(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer srv.Close()
	p, err := Listen("127.0.0.1:0", strings.TrimPrefix(srv.URL, "http://"), Options{
		Admit: func(*Conn) error { return fmt.Errorf("partitioned") },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	client := &http.Client{Timeout: 5 * time.Second}
	if _, err := client.Get("http://" + p.Addr() + "/raft/probing"); err == nil {
		t.Fatal("request through a refusing proxy succeeded")
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatal("condition not met within 5s")
}

// echoServer accepts connections and echoes every byte back, counting what it received.
type echoServer struct {
	ln       net.Listener
	received atomic.Int64
}

func startEcho(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echoServer{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						e.received.Add(int64(n))
						if _, werr := c.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return e
}

// dialAs opens a connection through p whose first request names sender from.
func dialAs(t *testing.T, p *Proxy, from string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	head := "GET /raft/stream/message/1 HTTP/1.1\r\nHost: x\r\n" + SenderHeader + ": " + from + "\r\n\r\n"
	if _, err := c.Write([]byte(head)); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(head))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != head {
		t.Fatalf("head echoed as %q, %v", got, err)
	}
	return c
}

// TestProxyStallHoldsBytesAndDeliversInOrder: a stalled direction delivers nothing; after Heal every byte
// arrives, in order.
func TestProxyStallHoldsBytesAndDeliversInOrder(t *testing.T) {
	echo := startEcho(t)
	p, err := Listen("127.0.0.1:0", echo.ln.Addr().String(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := dialAs(t, p, "a")
	base := echo.received.Load()

	p.SetPolicy("a", Inbound, Policy{Stall: true})
	msg := []byte(strings.Repeat("0123456789", 20000)) // 200 kB, several chunks
	go c.Write(msg)
	time.Sleep(300 * time.Millisecond)
	if got := echo.received.Load() - base; got != 0 {
		t.Fatalf("%d bytes crossed a stalled link", got)
	}
	if !p.Heal() {
		t.Fatal("Heal reports nothing was in force")
	}
	got := make([]byte, len(msg))
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("after heal: %v", err)
	}
	if string(got) != string(msg) {
		t.Fatal("bytes reordered or corrupted across a stall")
	}
}

// TestProxyStallOneDirection: stalling the member's replies (Outbound) leaves requests flowing in.
func TestProxyStallOneDirection(t *testing.T) {
	echo := startEcho(t)
	p, err := Listen("127.0.0.1:0", echo.ln.Addr().String(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := dialAs(t, p, "a")
	other := dialAs(t, p, "b")
	base := echo.received.Load()
	p.SetPolicy("a", Outbound, Policy{Stall: true})
	c.Write([]byte("ping"))
	waitFor(t, func() bool { return echo.received.Load()-base == 4 })
	c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if n, err := c.Read(make([]byte, 4)); err == nil {
		t.Fatalf("read %d bytes through a stalled outbound direction", n)
	}
	// Another sender is not affected.
	other.Write([]byte("pong"))
	other.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.ReadFull(other, make([]byte, 4)); err != nil {
		t.Fatalf("unshaped sender: %v", err)
	}
}

// TestProxyDelayAndJitterKeepOrder: every chunk is delayed by Delay..Delay+Jitter, bytes keep their order,
// and a delay in flight does not throttle throughput to one chunk per delay.
func TestProxyDelayAndJitterKeepOrder(t *testing.T) {
	echo := startEcho(t)
	p, err := Listen("127.0.0.1:0", echo.ln.Addr().String(), Options{Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := dialAs(t, p, "a")
	p.SetPolicy(AnySender, Inbound, Policy{Delay: 100 * time.Millisecond, Jitter: 50 * time.Millisecond})

	start := time.Now()
	c.Write([]byte("x"))
	if _, err := io.ReadFull(c, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if rtt := time.Since(start); rtt < 100*time.Millisecond || rtt > 1*time.Second {
		t.Fatalf("round trip %v through a 100ms+50ms jitter delay", rtt)
	}

	// 100 sequenced writes of distinct chunks: they arrive in order, and all within a few delays.
	var want bytes.Buffer
	start = time.Now()
	go func() {
		for i := range 100 {
			line := fmt.Sprintf("%06d;", i)
			c.Write([]byte(line))
			time.Sleep(time.Millisecond)
		}
	}()
	for i := range 100 {
		fmt.Fprintf(&want, "%06d;", i)
	}
	got := make([]byte, want.Len())
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if string(got) != want.String() {
		t.Fatalf("jitter reordered bytes: %q", got[:64])
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("100 small writes took %v: the delay throttles instead of adding latency", took)
	}
	p.SetPolicy(AnySender, Inbound, Policy{})
	start = time.Now()
	c.Write([]byte("y"))
	io.ReadFull(c, make([]byte, 1))
	if rtt := time.Since(start); rtt > 80*time.Millisecond {
		t.Fatalf("round trip %v after the delay was removed", rtt)
	}
}

// TestProxyBandwidth: 1 MB through a 2 MB/s link takes about half a second.
func TestProxyBandwidth(t *testing.T) {
	echo := startEcho(t)
	p, err := Listen("127.0.0.1:0", echo.ln.Addr().String(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := dialAs(t, p, "a")
	p.SetPolicy("a", Inbound, Policy{Bandwidth: 2 << 20})
	msg := make([]byte, 1<<20)
	start := time.Now()
	go c.Write(msg)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.ReadFull(c, make([]byte, len(msg))); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 400*time.Millisecond || took > 3*time.Second {
		t.Fatalf("1 MiB through a 2 MiB/s link took %v", took)
	}
}

// TestProxyRefuseResetsAndRefuses: refusing a sender closes its open connections and refuses new ones;
// admitting it again lets it back in.
func TestProxyRefuseResetsAndRefuses(t *testing.T) {
	echo := startEcho(t)
	p, err := Listen("127.0.0.1:0", echo.ln.Addr().String(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	c := dialAs(t, p, "a")
	keep := dialAs(t, p, "b")
	p.SetRefused("a", true)
	c.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil {
		t.Fatal("open connection of a refused sender still works")
	}
	n, _ := net.Dial("tcp", p.Addr())
	n.Write([]byte("GET / HTTP/1.1\r\n" + SenderHeader + ": a\r\n\r\n"))
	n.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := n.Read(make([]byte, 1)); err == nil {
		t.Fatal("new connection of a refused sender was accepted")
	}
	n.Close()
	keep.Write([]byte("k"))
	keep.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := io.ReadFull(keep, make([]byte, 1)); err != nil {
		t.Fatalf("another sender's connection: %v", err)
	}
	p.SetRefused("a", false)
	dialAs(t, p, "a")
}

// TestProxyStalledConnectionDiesWithItsClient: a client that hangs up while its request is held by a stall
// takes the connection with it; the request is not delivered after the heal.
func TestProxyStalledConnectionDiesWithItsClient(t *testing.T) {
	echo := startEcho(t)
	p, err := Listen("127.0.0.1:0", echo.ln.Addr().String(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	p.SetPolicy(AnySender, Inbound, Policy{Stall: true})
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("GET / HTTP/1.1\r\n" + SenderHeader + ": a\r\n\r\n"))
	waitFor(t, func() bool { return len(p.Conns()) == 1 })
	c.Close()
	waitFor(t, func() bool { return len(p.Conns()) == 0 })
	p.Heal()
	time.Sleep(100 * time.Millisecond)
	if got := echo.received.Load(); got != 0 {
		t.Fatalf("%d bytes of an abandoned request were delivered after the heal", got)
	}
}

// BenchmarkProxyRoundTrip measures what the proxy adds to a small request-response exchange, as a raft
// heartbeat and its answer make, against the same exchange without the proxy.
func BenchmarkProxyRoundTrip(b *testing.B) {
	for _, through := range []bool{false, true} {
		name := "direct"
		if through {
			name = "proxied"
		}
		b.Run(name, func(b *testing.B) {
			t := &testing.T{}
			echo := startEcho(t)
			addr := echo.ln.Addr().String()
			if through {
				p, err := Listen("127.0.0.1:0", addr, Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer p.Close()
				addr = p.Addr()
			}
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			head := []byte("GET /raft/stream/message/1 HTTP/1.1\r\n" + SenderHeader + ": a\r\n\r\n")
			c.Write(head)
			io.ReadFull(c, make([]byte, len(head)))
			msg, buf := make([]byte, 64), make([]byte, 64)
			b.ResetTimer()
			for range b.N {
				c.Write(msg)
				io.ReadFull(c, buf)
			}
		})
	}
}

// BenchmarkProxyThroughput streams 1 MiB chunks through the proxy and back.
func BenchmarkProxyThroughput(b *testing.B) {
	t := &testing.T{}
	echo := startEcho(t)
	p, err := Listen("127.0.0.1:0", echo.ln.Addr().String(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	msg, buf := make([]byte, 1<<20), make([]byte, 1<<20)
	b.SetBytes(int64(len(msg)))
	b.ResetTimer()
	for range b.N {
		go c.Write(msg)
		io.ReadFull(c, buf)
	}
}

// TestProxyForwardsTLSAtOnce: a client that speaks first but not HTTP/1 (a TLS ClientHello, then a wait for
// the server's answer) must not be held while the proxy looks for a request head it will never see: a
// probe with a deadline of headTimeout or less would never get through.
func TestProxyForwardsTLSAtOnce(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	defer srv.Close()
	p, err := Listen("127.0.0.1:0", strings.TrimPrefix(srv.URL, "https://"), Options{
		Identify: func(net.Addr, net.Addr) string { return "from-proc" },
	})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	client := srv.Client()
	client.Timeout = headTimeout / 2
	start := time.Now()
	resp, err := client.Get("https://" + p.Addr() + "/health")
	if err != nil {
		t.Fatalf("TLS request through the proxy (after %v): %v", time.Since(start).Round(time.Millisecond), err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "ok" {
		t.Fatalf("body %q through the proxy, want ok", body)
	}
	// An opaque connection is still attributed by Identify.
	conns := p.Conns()
	if len(conns) != 1 || conns[0].From != "from-proc" || conns[0].Path != "" {
		t.Fatalf("connections %+v, want one identified as from-proc, without a path", conns)
	}
}

func TestMayBeRequest(t *testing.T) {
	for _, tc := range []struct {
		name string
		b    string
		want bool
	}{
		{"partial method", "PO", true},
		{"request line", "POST /raft/stream HTTP/1.1\r\n", true},
		{"http2 preface", "PRI * HTTP/2.0\r\n", true},
		{"tls client hello", "\x16\x03\x01\x02\x00\x01", false},
		{"leading space", " GET /", false},
		{"control byte in method", "GE\x00T /", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := mayBeRequest([]byte(tc.b)); got != tc.want {
				t.Fatalf("mayBeRequest(%q) = %v, want %v", tc.b, got, tc.want)
			}
		})
	}
}
