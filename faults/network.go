package faults

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/clusters/proxy"
)

// Network faults act on the peer proxies in front of every member. A raft message from X to Y crosses
// exactly one proxy: Y's when X sends it on a connection X opened (pipeline requests: Inbound on Y's
// proxy), X's when it travels on a stream Y opened to X (etcd writes stream messages in the response body:
// Outbound on X's proxy). Blocking X->Y therefore stalls Inbound-from-X on Y's proxy and Outbound-to-Y on
// X's proxy. Connections without X-Server-From (version probes, lease forwarding) are attributed by the
// embedded cluster to the member process that opened them, so a partitioned member is cut off from those
// too. A stalled link holds bytes back and delivers them in order once healed, or loses the connection as
// a whole if its client gives up first; it never drops bytes of a stream.
//
// Network faults on the same link do not stack: a later one replaces an earlier one's policy, and the
// first heal heals the link.

func memberID(m clusters.Member) (string, error) {
	if m.ID() == 0 {
		return "", fmt.Errorf("member %s: raft id not known yet", m.Name())
	}
	return strconv.FormatUint(m.ID(), 16), nil
}

// proxies returns the peer proxy of every member of c.
func proxies(c clusters.Cluster) (map[string]*proxy.Proxy, error) {
	pc, ok := c.(proxied)
	if !ok {
		return nil, fmt.Errorf("needs peer proxies (embedded and docker clusters have them); a %s cluster has none", c.Backend())
	}
	out := map[string]*proxy.Proxy{}
	for _, m := range c.Members() {
		p := pc.Proxy(m.Name())
		if p == nil {
			return nil, fmt.Errorf("member %s has no peer proxy (a docker cluster has them only when started with PeerProxies)", m.Name())
		}
		out[m.Name()] = p
	}
	return out, nil
}

// links undoes the policies a network fault set.
type links struct {
	mu       sync.Mutex
	policies []policyKey
	refused  []policyKey
}

type policyKey struct {
	px   *proxy.Proxy
	from string
	dir  proxy.Direction
}

func (l *links) set(px *proxy.Proxy, from string, d proxy.Direction, pol proxy.Policy) {
	px.SetPolicy(from, d, pol)
	l.mu.Lock()
	l.policies = append(l.policies, policyKey{px, from, d})
	l.mu.Unlock()
}

func (l *links) refuse(px *proxy.Proxy, from string) {
	px.SetRefused(from, true)
	l.mu.Lock()
	l.refused = append(l.refused, policyKey{px: px, from: from})
	l.mu.Unlock()
}

func (l *links) heal() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, k := range l.policies {
		k.px.SetPolicy(k.from, k.dir, proxy.Policy{})
	}
	for _, k := range l.refused {
		k.px.SetRefused(k.from, false)
	}
	l.policies, l.refused = nil, nil
}

// pairs returns every (target, other member) pair: the links a network fault on the targets shapes. With
// others set to the members outside targets (a partition) the pairs cross the cut; otherwise (delay) they
// are every link that touches a target.
func pairs(targets, all []clusters.Member, crossOnly bool) [][2]clusters.Member {
	var out [][2]clusters.Member
	isTarget := func(m clusters.Member) bool {
		return slices.ContainsFunc(targets, func(t clusters.Member) bool { return t.Name() == m.Name() })
	}
	for _, x := range targets {
		for _, y := range all {
			if y.Name() == x.Name() || (crossOnly && isTarget(y)) {
				continue
			}
			// A link between two targets is listed once.
			if !crossOnly && isTarget(y) && y.Name() < x.Name() {
				continue
			}
			out = append(out, [2]clusters.Member{x, y})
		}
	}
	return out
}

// Partition cuts its targets off from the other members: both directions by default, or only messages to
// the targets (in) or from them (out); by stalling the links (a blackhole: connections hang, then time out)
// or, with refuse, by refusing connections and resetting open ones (as a firewall that rejects). With
// clients, the targets' client proxies stall (or refuse) clients too.
type Partition struct {
	base
	links
	snap snapshotWatch // =until-snapshot (snapshot.go)
}

// Available needs the peer proxies (and client proxies to cut clients off).
func (f *Partition) Available(c clusters.Cluster) error {
	if _, err := proxies(c); err != nil {
		return err
	}
	if len(c.Members()) < 2 {
		return errors.New("a partition needs at least 2 members")
	}
	if f.p.client {
		cp, ok := c.(clientProxied)
		if !ok {
			return errors.New("cutting clients off needs client proxies")
		}
		for _, m := range c.Members() {
			if cp.ClientProxy(m.Name()) == nil {
				return errors.New("cutting clients off needs client proxies (--client-proxies)")
			}
		}
	}
	return nil
}

// Inject sets the stalls or refusals on every link across the cut.
func (f *Partition) Inject(ctx context.Context) error {
	pxs, err := proxies(f.env.Cluster)
	if err != nil {
		return err
	}
	if err := f.resolve(ctx, f.env.Cluster.Members()); err != nil {
		return err
	}
	in, out := f.p.in, f.p.out
	if !in && !out {
		in, out = true, true
	}
	stall := proxy.Policy{Stall: true}
	for _, pr := range pairs(f.targets, f.env.Cluster.Members(), true) {
		x, y := pr[0], pr[1]
		idX, err := memberID(x)
		if err != nil {
			return err
		}
		idY, err := memberID(y)
		if err != nil {
			return err
		}
		pxX, pxY := pxs[x.Name()], pxs[y.Name()]
		if f.p.refuse {
			f.refuse(pxX, idY)
			f.refuse(pxY, idX)
			continue
		}
		if out { // X's messages do not reach Y
			f.set(pxY, idX, proxy.Inbound, stall)
			f.set(pxX, idY, proxy.Outbound, stall)
		}
		if in { // Y's messages do not reach X
			f.set(pxX, idY, proxy.Inbound, stall)
			f.set(pxY, idX, proxy.Outbound, stall)
		}
	}
	if f.p.client {
		cp := f.env.Cluster.(clientProxied)
		for _, x := range f.targets {
			px := cp.ClientProxy(x.Name())
			if f.p.refuse {
				f.refuse(px, proxy.AnySender)
				continue
			}
			f.set(px, proxy.AnySender, proxy.Inbound, stall)
			f.set(px, proxy.AnySender, proxy.Outbound, stall)
		}
	}
	return nil
}

// Recover removes every stall and refusal the partition set; a partition held until a snapshot then
// waits for the leader to send it (snapshot.go).
func (f *Partition) Recover(ctx context.Context) error {
	f.heal()
	if f.p.untilSnapshot {
		f.awaitSnapshotSent(ctx)
	}
	return nil
}

// Shape slows every link of its targets: delay (with jitter) or a bandwidth limit, in both directions.
// Each message crosses one proxy, so a delay of d adds d to every message to or from a target, and 2d to
// a round trip between a target and another member.
type Shape struct {
	base
	links
}

// Available needs the peer proxies.
func (f *Shape) Available(c clusters.Cluster) error {
	if _, err := proxies(c); err != nil {
		return err
	}
	if len(c.Members()) < 2 {
		return errors.New("a network fault needs at least 2 members")
	}
	return nil
}

// Inject shapes the links.
func (f *Shape) Inject(ctx context.Context) error {
	pxs, err := proxies(f.env.Cluster)
	if err != nil {
		return err
	}
	if err := f.resolve(ctx, f.env.Cluster.Members()); err != nil {
		return err
	}
	pol := proxy.Policy{Delay: f.p.delay, Jitter: f.p.jitter, Bandwidth: f.p.bandwidth}
	for _, pr := range pairs(f.targets, f.env.Cluster.Members(), false) {
		x, y := pr[0], pr[1]
		idX, err := memberID(x)
		if err != nil {
			return err
		}
		idY, err := memberID(y)
		if err != nil {
			return err
		}
		for _, d := range []proxy.Direction{proxy.Inbound, proxy.Outbound} {
			f.set(pxs[x.Name()], idY, d, pol)
			f.set(pxs[y.Name()], idX, d, pol)
		}
	}
	return nil
}

// Recover removes the shaping.
func (f *Shape) Recover(context.Context) error {
	f.heal()
	return nil
}

// Reset closes every peer connection of its targets (those to them and those they opened), once, or with
// an interval again and again for the window: etcd's peers reconnect each time.
type Reset struct {
	base
	stop chan struct{}
	done chan struct{}
}

// Available needs the peer proxies.
func (f *Reset) Available(c clusters.Cluster) error {
	_, err := proxies(c)
	return err
}

// Inject resets the connections, and keeps resetting them every interval until Recover.
func (f *Reset) Inject(ctx context.Context) error {
	pxs, err := proxies(f.env.Cluster)
	if err != nil {
		return err
	}
	if err := f.resolve(ctx, f.env.Cluster.Members()); err != nil {
		return err
	}
	var ids []string
	for _, x := range f.targets {
		id, err := memberID(x)
		if err != nil {
			return err
		}
		ids = append(ids, id)
	}
	reset := func() int {
		n := 0
		for _, x := range f.targets {
			n += pxs[x.Name()].Reset(func(proxy.Conn) bool { return true })
		}
		for name, px := range pxs {
			if !slices.Contains(names(f.targets), name) {
				n += px.Reset(func(c proxy.Conn) bool { return slices.Contains(ids, c.From) })
			}
		}
		return n
	}
	n := reset()
	f.env.logf("fault %s: reset %d connections", f.name, n)
	if f.p.interval > 0 && f.hold > 0 {
		f.stop, f.done = make(chan struct{}), make(chan struct{})
		go func() {
			defer close(f.done)
			t := time.NewTicker(f.p.interval)
			defer t.Stop()
			for {
				select {
				case <-f.stop:
					return
				case <-t.C:
					reset()
				}
			}
		}()
	}
	return nil
}

// Recover stops the repeated resets.
func (f *Reset) Recover(context.Context) error {
	if f.stop != nil {
		close(f.stop)
		<-f.done
	}
	return nil
}
