package clusters

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"

	"github.com/etcd-chaosbench/chaosbench/clusters/proxy"
)

// startProxy starts member i's peer proxy on the cluster network's gateway, the host's address on the
// bridge, which every container reaches directly: members advertise the proxy as their peer URL, and it
// forwards to the member's own peer port. A container's connections to the gateway keep the container's
// address as their source (no NAT between a bridge and its host), so the proxy tells members apart by
// source address even on connections without X-Server-From (version probes, lease forwarding).
func (c *Docker) startProxy(i int, ips []netip.Addr) (*proxy.Proxy, error) {
	f, err := os.OpenFile(filepath.Join(c.opts.Dir, "members", fmt.Sprintf("m%d.proxy.log", i+1)), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("proxy log: %w", err)
	}
	c.pxLogs = append(c.pxLogs, f)
	px, err := proxy.Listen(netip.AddrPortFrom(c.gateway, 0).String(), netip.AddrPortFrom(ips[i], dockerPeerPort).String(),
		proxy.Options{Identify: c.identifySender, Seed: c.opts.Seed + uint64(i), Log: f})
	if err != nil {
		return nil, fmt.Errorf("peer proxy of m%d: %w", i+1, err)
	}
	c.proxies = append(c.proxies, px)
	c.events.Printf("peer proxy of m%d: %s -> %s", i+1, px.Addr(), px.Target())
	return px, nil
}

// identifySender names the member a connection to a peer proxy comes from by its source address (see
// startProxy): the member's id in hex, as X-Server-From carries it, or "" when it is no member's.
func (c *Docker) identifySender(remote, _ net.Addr) string {
	addr, ok := remote.(*net.TCPAddr)
	if !ok {
		return ""
	}
	ip, ok := netip.AddrFromSlice(addr.IP)
	if !ok {
		return ""
	}
	for _, m := range c.members {
		if m.ip == ip.Unmap() && m.ID() != 0 {
			return strconv.FormatUint(m.ID(), 16)
		}
	}
	return ""
}

// Proxy returns the peer proxy in front of the named member, or nil when the cluster has none (see
// DockerOptions.PeerProxies).
func (c *Docker) Proxy(member string) *proxy.Proxy {
	for i, m := range c.members {
		if m.name == member && i < len(c.proxies) {
			return c.proxies[i]
		}
	}
	return nil
}
