package clusters

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"
)

// layout assigns addresses, generates certificates and creates (without starting) the member containers.
func (c *Docker) layout(ctx context.Context) error {
	ips := c.memberIPs()
	serverTLS, err := c.memberTLS(ips)
	if err != nil {
		return err
	}
	c.status = newStatusClient(c.clientTLS)
	peerURLs, initial, err := c.peerURLs(ips)
	if err != nil {
		return err
	}
	for i, ip := range ips {
		m, err := c.newMember(ctx, i, ip, peerURLs[i], initial, serverTLS)
		if err != nil {
			return err
		}
		c.members = append(c.members, m)
	}
	return c.createContainers(ctx)
}

// memberTLS generates the members' certificates when they serve TLS, for their container addresses,
// which clients dial directly, and sets up the cluster's client side; it returns the server files to mount.
func (c *Docker) memberTLS(ips []netip.Addr) (serverTLS TLSFiles, err error) {
	if !c.opts.TLS {
		return TLSFiles{}, nil
	}
	hosts := make([]net.IP, len(ips))
	for i, ip := range ips {
		hosts[i] = net.IP(ip.AsSlice())
	}
	if serverTLS, c.tlsFiles, err = generateTLS(filepath.Join(c.opts.Dir, "tls"), hosts); err != nil {
		return TLSFiles{}, err
	}
	if c.clientTLS, err = c.tlsFiles.ClientConfig(); err != nil {
		return TLSFiles{}, err
	}
	return serverTLS, nil
}

// peerURLs returns the URL each member advertises to its peers, and the --initial-cluster entries made of
// them. With peer proxies it starts them: the proxy's address is then the member's peer URL, so that all
// peer traffic passes through it.
func (c *Docker) peerURLs(ips []netip.Addr) (peerURLs, initial []string, err error) {
	peerURLs = make([]string, len(ips))
	for i := range ips {
		peerURLs[i] = fmt.Sprintf("http://%s", netip.AddrPortFrom(ips[i], dockerPeerPort))
		if c.opts.PeerProxies {
			px, err := c.startProxy(i, ips)
			if err != nil {
				return nil, nil, err
			}
			peerURLs[i] = "http://" + px.Addr()
		}
		initial = append(initial, fmt.Sprintf("m%d=%s", i+1, peerURLs[i]))
	}
	return peerURLs, initial, nil
}

// newMember prepares member i at address ip: its data directory (under slowfs when disk faults need it,
// mounted before the container exists, so that the bind mount shows it), its etcd flags and its raft id.
// Its container is not created yet.
func (c *Docker) newMember(ctx context.Context, i int, ip netip.Addr, peerURL string, initial []string, serverTLS TLSFiles) (*containerMember, error) {
	name := fmt.Sprintf("m%d", i+1)
	img := c.opts.Images[0]
	if len(c.opts.Images) > 1 {
		img = c.opts.Images[i]
	}
	m := &containerMember{
		cluster:    c,
		name:       name,
		ip:         ip,
		image:      img,
		clientURL:  fmt.Sprintf("%s://%s", c.clientScheme(), netip.AddrPortFrom(ip, dockerClientPort)),
		peerURL:    peerURL,
		metricsURL: fmt.Sprintf("http://%s", netip.AddrPortFrom(ip, dockerMetricsPort)),
		dataDir:    filepath.Join(c.opts.Dir, "members", name+".etcd"),
		logPath:    filepath.Join(c.opts.Dir, "members", name+".log"),
	}
	// Owned by this user and private, as etcd wants its data directory: the container runs as this
	// user, so the run directory stays removable without root.
	if err := os.MkdirAll(m.dataDir, 0o700); err != nil {
		return nil, fmt.Errorf("create data dir of %s: %w", name, err)
	}
	if c.opts.SlowFS != nil {
		if err := c.mountDisk(ctx, m); err != nil {
			return nil, err
		}
	}
	m.args = c.memberArgs(m, initial, serverTLS)
	// etcd derives a new cluster's member ids from the peer URLs and the cluster token; knowing them
	// before the members start lets the proxies attribute every connection from the first one on.
	if urls, err := types.NewURLs([]string{m.peerURL}); err == nil {
		m.setID(uint64(membership.NewMember(name, urls, c.opts.Token, nil).ID))
	}
	return m, nil
}

// clientScheme is the scheme of the members' client URLs.
func (c *Docker) clientScheme() string {
	if c.opts.TLS {
		return "https"
	}
	return "http"
}

// memberArgs returns m's etcd flags as seen from inside its container: etcd's standard ports on every
// address of the container's own network namespace, and its data and certificates where the bind mounts
// put them.
func (c *Docker) memberArgs(m *containerMember, initial []string, serverTLS TLSFiles) []string {
	args := []string{
		"--name=" + m.name,
		"--data-dir=" + containerDataDir,
		fmt.Sprintf("--listen-client-urls=%s://0.0.0.0:%d", c.clientScheme(), dockerClientPort),
		"--advertise-client-urls=" + m.clientURL,
		fmt.Sprintf("--listen-peer-urls=http://0.0.0.0:%d", dockerPeerPort),
		"--initial-advertise-peer-urls=" + m.peerURL,
		fmt.Sprintf("--listen-metrics-urls=http://0.0.0.0:%d", dockerMetricsPort),
		"--initial-cluster=" + strings.Join(initial, ","),
		"--initial-cluster-state=new",
		"--initial-cluster-token=" + c.opts.Token,
		"--log-outputs=stderr",
	}
	if m.image.Minor() == 4 && !slices.ContainsFunc(c.opts.EtcdFlags, func(f EtcdFlag) bool { return f.Name == "logger" }) {
		// 3.4 logs through capnslog unless told otherwise; zap gives every version the same log format.
		args = append(args, "--logger=zap")
	}
	if c.opts.TLS {
		args = append(args,
			"--cert-file="+containerTLSDir+"/"+filepath.Base(serverTLS.Cert),
			"--key-file="+containerTLSDir+"/"+filepath.Base(serverTLS.Key),
			"--trusted-ca-file="+containerTLSDir+"/"+filepath.Base(serverTLS.CA),
			"--client-cert-auth=true")
	}
	for _, f := range c.opts.EtcdFlags {
		args = append(args, f.Arg())
	}
	return args
}

// createContainers creates every member's container in parallel, without starting it: members start
// together later, since none serves clients before a quorum runs.
func (c *Docker) createContainers(ctx context.Context) error {
	errs := make([]error, len(c.members))
	var wg sync.WaitGroup
	for i, m := range c.members {
		wg.Go(func() { errs[i] = m.create(ctx) })
	}
	wg.Wait()
	return errors.Join(errs...)
}
