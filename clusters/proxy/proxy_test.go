package proxy

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
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
		Identify: func(net.Addr) string { return "from-proc" },
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
