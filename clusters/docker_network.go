package clusters

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
)

// createNetwork creates the cluster's bridge network with a subnet of its own. Static member addresses
// (which keep a restarted member's peer URL valid) need a subnet given at creation, so the daemon is first
// asked to pick a free one from its address pools, through a probe network that is removed at once.
func (c *Docker) createNetwork(ctx context.Context) error {
	c.netName = "chaosbench-" + c.id
	var lastErr error
	for range 5 {
		probe, err := c.docker.NetworkCreate(ctx, c.netName+"-probe", client.NetworkCreateOptions{
			Driver: "bridge", Labels: c.labels,
		})
		if err != nil {
			return fmt.Errorf("create docker network: %w", err)
		}
		info, err := c.docker.NetworkInspect(ctx, probe.ID, client.NetworkInspectOptions{})
		_, rmErr := c.docker.NetworkRemove(ctx, probe.ID, client.NetworkRemoveOptions{})
		if err != nil || rmErr != nil {
			return fmt.Errorf("create docker network: %w", errors.Join(err, rmErr))
		}
		var subnet netip.Prefix
		for _, cfg := range info.Network.IPAM.Config {
			if cfg.Subnet.Addr().Is4() {
				subnet = cfg.Subnet
			}
		}
		if !subnet.IsValid() || subnet.Bits() > 28 {
			return fmt.Errorf("create docker network: the engine offered no usable IPv4 subnet (%v)", info.Network.IPAM.Config)
		}
		gateway := subnet.Masked().Addr().Next()
		created, err := c.docker.NetworkCreate(ctx, c.netName, client.NetworkCreateOptions{
			Driver: "bridge",
			Labels: c.labels,
			IPAM:   &network.IPAM{Config: []network.IPAMConfig{{Subnet: subnet, Gateway: gateway}}},
		})
		if err != nil {
			// Another network took the subnet between probe and creation: ask again.
			lastErr = err
			continue
		}
		c.network, c.subnet, c.gateway = created.ID, subnet, gateway
		c.events.Printf("network %s (%s): subnet %s, gateway %s", c.netName, created.ID[:12], subnet, gateway)
		return nil
	}
	return fmt.Errorf("create docker network: %w", lastErr)
}

// memberIPs gives each member a static address on the cluster's subnet, the ones after the gateway: a
// restarted member keeps its address, and with it the peer URL the others know it by.
func (c *Docker) memberIPs() []netip.Addr {
	ips := make([]netip.Addr, c.opts.Members)
	next := c.gateway
	for i := range ips {
		next = next.Next()
		ips[i] = next
	}
	return ips
}
