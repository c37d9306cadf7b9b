package clusters

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters/proxy"
)

// TestEmbeddedTLSClientProxies: members that serve TLS behind client proxies start, serve a client built
// from the cluster's own configuration, and are really reached through their proxies: stalling one
// member's client proxy (as a partition=clients fault does) cuts that member off from its clients and
// healing it lets them in again.
func TestEmbeddedTLSClientProxies(t *testing.T) {
	t.Parallel() // its own cluster; judges no latency
	ef, err := ParseEtcdFlags([]string{"heartbeat-interval=50", "election-timeout=500"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := StartEmbedded(ctx, EmbedOptions{Members: 3, Dir: t.TempDir(), EtcdFlags: ef, TLS: true, ClientProxies: true})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	for i, m := range c.Members() {
		cp := c.ClientProxy(m.Name())
		if cp == nil {
			t.Fatalf("%s has no client proxy", m.Name())
		}
		if want := "https://" + cp.Addr(); c.Endpoints()[i] != want || m.ClientURL() != want {
			t.Fatalf("%s advertises %s (endpoint %s), want its client proxy %s", m.Name(), m.ClientURL(), c.Endpoints()[i], want)
		}
	}

	cli := newClient(t, c)
	if _, err := cli.Put(ctx, "tls-proxied", "ok"); err != nil {
		t.Fatalf("put: %v", err)
	}
	if resp, err := cli.Get(ctx, "tls-proxied"); err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "ok" {
		t.Fatalf("get: %v %v", resp, err)
	}

	// A client of m1 alone goes through m1's client proxy.
	target := c.Members()[0]
	cp := c.ClientProxy(target.Name())
	cut, rest := newClient(t, c, target), newClient(t, c, c.Members()[1:]...)
	if _, err := cut.Get(ctx, "tls-proxied"); err != nil {
		t.Fatalf("get through %s's client proxy: %v", target.Name(), err)
	}
	if len(cp.Conns()) == 0 {
		t.Fatalf("%s's client proxy carries no connection after a get through it", target.Name())
	}

	// Cut m1 off from its clients the way faults.Partition does for =clients.
	cp.SetPolicy(proxy.AnySender, proxy.Inbound, proxy.Policy{Stall: true})
	cp.SetPolicy(proxy.AnySender, proxy.Outbound, proxy.Policy{Stall: true})
	gctx, gcancel := context.WithTimeout(ctx, time.Second)
	_, err = cut.Get(gctx, "tls-proxied")
	gcancel()
	if err == nil {
		t.Fatalf("a get through %s's stalled client proxy succeeded", target.Name())
	}
	if !errors.Is(err, context.DeadlineExceeded) && !strings.Contains(err.Error(), "DeadlineExceeded") {
		t.Fatalf("get through %s's stalled client proxy: %v, want a deadline exceeded", target.Name(), err)
	}
	// The other members still serve their clients, and the cluster still has m1 as a member.
	if _, err := rest.Put(ctx, "tls-proxied", "during"); err != nil {
		t.Fatalf("put through the other members during the cut: %v", err)
	}

	if !cp.Heal() {
		t.Fatal("heal: the client proxy had nothing in force")
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		gctx, gcancel := context.WithTimeout(ctx, 2*time.Second)
		resp, err := cut.Get(gctx, "tls-proxied")
		gcancel()
		if err == nil {
			if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "during" {
				t.Fatalf("get through %s after the heal: %v, want the value put during the cut", target.Name(), resp.Kvs)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("get through %s's client proxy after the heal: %v", target.Name(), err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
