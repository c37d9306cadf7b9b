package clusters

import (
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"

	"github.com/etcd-chaosbench/chaosbench/clusters/proxy"
)

// Ports inside every member container. Each member has its own network namespace and IP, so all use
// etcd's standard ports.
const (
	dockerClientPort  = 2379
	dockerPeerPort    = 2380
	dockerMetricsPort = 2381
	// dockerFailpointPort serves a failpoint build's gofail endpoint (GOFAIL_HTTP) inside a member.
	dockerFailpointPort = 2382
	// containerDataDir and containerTLSDir are where the bind mounts appear inside a member.
	containerDataDir = "/data"
	containerTLSDir  = "/tls"
)

// DockerOptions configures a cluster of member containers.
type DockerOptions struct {
	// Members is the cluster size: 1, 3 or 5.
	Members int
	// Dir is the run directory: member data (bind-mounted into the containers) and logs go under
	// Dir/members, Docker events to Dir/docker.log.
	Dir string
	// Images are the members' images: one for every member, or one per member (mixed versions). See
	// ResolveImage; missing images are built.
	Images []EtcdImage
	// EtcdFlags are passed to every member; they must have been validated against the members' versions
	// (see ParseEtcdFlagsFor).
	EtcdFlags []EtcdFlag
	// Token is the initial cluster token (default "chaosbench").
	Token string
	// TLS makes members serve clients over mutual TLS; certificates are generated under Dir/tls and
	// mounted read-only.
	TLS bool
	// CPUs limits each member container's CPU time (1.5 = one and a half cores); 0 means no limit.
	CPUs float64
	// Memory limits each member container's memory in bytes (swap included: no swapping); 0 means no
	// limit.
	Memory int64
	// Log receives progress messages (images built, orphans removed, members that exit unexpectedly);
	// nil discards them.
	Log io.Writer
	// OnExit, when set, is called whenever a member container stops (crashes included).
	OnExit func(ExitEvent)
	// StartTimeout bounds the wait for the new cluster to become healthy (default 60 s).
	StartTimeout time.Duration
	// ReaperCommand starts the watchdog that removes the cluster's containers and network if this
	// process dies without closing it; default: this executable in ReaperCommand mode (test binaries
	// provide it through RunMemberIfRequested).
	ReaperCommand []string
	// PeerProxies routes every member's peer traffic through a TCP proxy on the host (package proxy, the
	// same as an embedded cluster's), so that network faults can cut, stall, slow and reset links between
	// members; see Docker.Proxy. Off by default: the proxies put a userland hop (and host CPU outside the
	// members' limits) into every raft message, which a plain benchmark must not pay.
	PeerProxies bool
	// Seed seeds the jitter of the proxies, so that a run's faults replay with its seed.
	Seed uint64
	// SlowFS, when set, serves every member's data directory through a slowfs mount on the host,
	// bind-mounted into its container (see docker_disk.go), so that disk faults can slow its fsyncs and
	// writes and drop its unsynced writes.
	SlowFS *SlowFSOptions
	// MoreImages are images members may be moved to during the run (rolling upgrades and downgrades, see
	// Docker.SetImage); they are built at start like Images.
	MoreImages []EtcdImage
}

// Docker is a cluster of etcd member containers on a Docker network of their own, with static IPs, started
// and owned by chaosbench. Its members are Processes: they can be killed, stopped, paused and restarted,
// and keep their data (a bind mount of the run directory) across restarts.
type Docker struct {
	opts      DockerOptions
	id        string
	docker    *testcontainers.DockerClient
	network   string // id
	netName   string
	subnet    netip.Prefix
	gateway   netip.Addr
	members   []*containerMember
	status    *statusClient
	clientTLS *tls.Config
	tlsFiles  TLSFiles
	auth      *Auth // set once by EnableAuth, before any other client connects
	labels    map[string]string
	events    *log.Logger // docker.log in the run directory
	eventFile *os.File
	reaper    *reaper
	proxies   []*proxy.Proxy // one per member when PeerProxies, else nil
	pxLogs    []*os.File

	spawner *spawner // starts the slowfs helpers, when SlowFS is set

	staleMu sync.Mutex
	stale   []string // containers of earlier images of members that could not be removed at once

	// watchCtx ends the members' exit watchers and log followers once the containers are removed.
	watchCtx    context.Context
	stopWatches context.CancelFunc
	watchers    sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
}

var _ Cluster = (*Docker)(nil)

// StartDocker starts a new cluster of member containers and waits until it is healthy. It first removes
// what crashed chaosbench runs left behind, and builds missing images. On failure everything started is
// removed again.
func StartDocker(ctx context.Context, opts DockerOptions) (*Docker, error) {
	switch opts.Members {
	case 1, 3, 5:
	default:
		return nil, outcome.Usagef("--members %d: a docker cluster has 1, 3 or 5 members", opts.Members)
	}
	if len(opts.Images) != 1 && len(opts.Images) != opts.Members {
		return nil, outcome.Usagef("--etcd-version: give one version, or one per member (%d)", opts.Members)
	}
	if opts.Token == "" {
		opts.Token = "chaosbench"
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = 60 * time.Second
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("run dir: %w", err)
	}
	opts.Dir = dir
	if err := os.MkdirAll(filepath.Join(dir, "members"), 0o755); err != nil {
		return nil, fmt.Errorf("create members dir: %w", err)
	}
	d, err := DockerClient(ctx)
	if err != nil {
		return nil, err
	}
	c := &Docker{opts: opts, docker: d, id: newClusterID()}
	c.watchCtx, c.stopWatches = context.WithCancel(context.Background())
	if c.eventFile, err = os.OpenFile(filepath.Join(dir, "docker.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		d.Close()
		return nil, fmt.Errorf("docker log: %w", err)
	}
	if opts.SlowFS != nil {
		c.spawner = newSpawner() // closed by Close, from here on the only way out
	}
	c.events = log.New(c.eventFile, "", log.LstdFlags|log.Lmicroseconds)
	c.labels = map[string]string{
		LabelOwned: "true", LabelCluster: c.id, LabelOwner: selfOwner().String(), LabelRun: dir,
	}
	if err := c.start(ctx); err != nil {
		c.Close(context.Background())
		return nil, err
	}
	return c, nil
}

func (c *Docker) start(ctx context.Context) error {
	if report, err := RemoveOrphans(ctx, c.docker.Client, c.opts.Log); err != nil {
		return err
	} else if !report.Empty() {
		c.events.Printf("removed leftovers of dead chaosbench runs: %s", report)
	}
	images := map[string]bool{}
	for _, img := range append(slices.Clone(c.opts.Images), c.opts.MoreImages...) {
		if images[img.Ref] {
			continue
		}
		images[img.Ref] = true
		if built, err := EnsureImage(ctx, c.docker.Client, img, c.opts.Log); err != nil {
			return err
		} else if built {
			c.events.Printf("built image %s from %s", img.Ref, img.Binary)
		}
	}
	// The watchdog comes before any container or network: from here on, even kill -9 of chaosbench
	// leaves nothing behind.
	var err error
	if c.reaper, err = startReaper(c.opts.ReaperCommand, c.id, c.eventFile); err != nil {
		return err
	}
	if err := c.createNetwork(ctx); err != nil {
		return err
	}
	if err := c.layout(ctx); err != nil {
		return err
	}
	// Members start together: each waits only until its own process listens, because etcd serves
	// clients only once a quorum is up.
	errs := make([]error, len(c.members))
	var wg sync.WaitGroup
	for i, m := range c.members {
		wg.Go(func() { errs[i] = m.Start(ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("start cluster: %w", err)
	}
	wctx, cancel := context.WithTimeout(ctx, c.opts.StartTimeout)
	defer cancel()
	if err := c.WaitHealthy(wctx); err != nil {
		return fmt.Errorf("start cluster: %w (member logs in %s)", err, filepath.Join(c.opts.Dir, "members"))
	}
	c.events.Printf("cluster %s healthy: %s", c.id, strings.Join(c.Endpoints(), ","))
	return nil
}

// DockerClient connects to the Docker engine through testcontainers-go (DOCKER_HOST, the Docker context
// or the default socket) and checks that it answers. An unreachable engine is a usage error. Ryuk,
// testcontainers' garbage collector, is disabled unless TESTCONTAINERS_RYUK_DISABLED says otherwise: it
// runs from an image that must be pulled, and chaosbench cleans up by label itself.
func DockerClient(ctx context.Context) (*testcontainers.DockerClient, error) {
	if os.Getenv("TESTCONTAINERS_RYUK_DISABLED") == "" {
		os.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
	}
	d, err := testcontainers.NewDockerClientWithOpts(ctx)
	if err != nil {
		return nil, outcome.Usagef("docker: cannot reach the Docker engine: %v", err)
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := d.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		d.Close()
		return nil, outcome.Usagef("docker: cannot reach the Docker engine: %v", err)
	}
	return d, nil
}

func newClusterID() string {
	var b [6]byte
	crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (c *Docker) addStale(id string) {
	c.staleMu.Lock()
	c.stale = append(c.stale, id)
	c.staleMu.Unlock()
}

// Backend returns "docker".
func (c *Docker) Backend() string { return "docker" }

// ID returns the cluster id, the value of the LabelCluster label on its containers and network.
func (c *Docker) ID() string { return c.id }

// Network returns the name of the cluster's Docker network.
func (c *Docker) Network() string { return c.netName }

// FailpointURL returns the base URL of member's gofail endpoint ("" unless it runs a failpoint build).
func (c *Docker) FailpointURL(member string) string {
	for _, m := range c.members {
		if m.name == member && len(m.Image().Failpoints) > 0 {
			return fmt.Sprintf("http://%s", netip.AddrPortFrom(m.ip, dockerFailpointPort))
		}
	}
	return ""
}

// StoppedByFault reports whether member is down because a fault asked it to stop (a kill, a stop), not by
// a crash or a failpoint's panic.
func (c *Docker) StoppedByFault(member string) bool {
	for _, m := range c.members {
		if m.name == member {
			return m.stoppedByFault()
		}
	}
	return false
}

// ExpectCrash tells the cluster that member's process may end by a failpoint's panic (expect true), so
// that its exit is not reported as a crash, or withdraws that.
func (c *Docker) ExpectCrash(member string, expect bool) {
	for _, m := range c.members {
		if m.name == member {
			m.mu.Lock()
			if m.running {
				m.mayPanic = expect
			}
			m.mu.Unlock()
		}
	}
}

// Members returns the members; each is a Process.
func (c *Docker) Members() []Member {
	out := make([]Member, len(c.members))
	for i, m := range c.members {
		out[i] = m
	}
	return out
}

// Endpoints returns the members' client URLs (their container addresses).
func (c *Docker) Endpoints() []string {
	out := make([]string, len(c.members))
	for i, m := range c.members {
		out[i] = m.clientURL
	}
	return out
}

// TLS returns the client TLS configuration, or nil when members serve plaintext.
func (c *Docker) TLS() *tls.Config { return c.clientTLS }

func (c *Docker) authInfo() *Auth { return c.auth }
func (c *Docker) setAuth(a *Auth) { c.auth = a; c.status.setAuth(a) }

// ClientTLSFiles returns the client certificate files when members serve TLS.
func (c *Docker) ClientTLSFiles() (TLSFiles, bool) { return c.tlsFiles, c.opts.TLS }

// Leader asks every running member for its status and returns the leader of the highest term seen.
func (c *Docker) Leader(ctx context.Context) (Member, error) {
	return c.status.leader(ctx, c.running())
}

// WaitHealthy waits until every running member serves linearizable reads and all agree on one leader.
func (c *Docker) WaitHealthy(ctx context.Context) error {
	return c.status.waitHealthy(ctx, c.running)
}

func (c *Docker) running() []Member {
	var out []Member
	for _, m := range c.members {
		if m.Running() {
			out = append(out, m)
		}
	}
	return out
}

// removeTimeout bounds removing the containers and network at Close, which runs with a fresh context when
// the caller's has ended: leaving containers behind is worse than a late exit.
const removeTimeout = 30 * time.Second

// lastMemberGrace bounds the graceful stop of the last member at Close.
const lastMemberGrace = 2 * time.Second

// Close stops the members (followers first, then the leader, gracefully and then by force when ctx ends),
// removes the containers and the network, and stops the watchdog. Data directories and logs stay in the run
// directory. It is safe to call more than once.
func (c *Docker) Close(ctx context.Context) error {
	c.closeOnce.Do(func() {
		var errs []error
		if c.status != nil && len(c.running()) > 0 {
			lctx, cancel := context.WithTimeout(ctx, probeTimeout)
			leader, _ := c.Leader(lctx)
			cancel()
			var followers, last []*containerMember
			for _, m := range c.members {
				if leader != nil && m.Name() == leader.Name() {
					last = append(last, m)
				} else {
					followers = append(followers, m)
				}
			}
			errs = append(errs, stopContainers(ctx, followers)...)
			// With its followers gone the leader has nobody to hand leadership to, yet etcd tries for
			// seconds before it exits: a short grace, then SIGKILL (its WAL is synced either way).
			lctx, cancel = context.WithTimeout(ctx, lastMemberGrace)
			errs = append(errs, stopContainers(lctx, last)...)
			cancel()
		}
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
		defer cancel()
		for _, m := range c.members {
			errs = append(errs, m.remove(rctx))
		}
		errs = append(errs, c.unmountDisks(rctx)...)
		if c.spawner != nil {
			c.spawner.close()
		}
		c.staleMu.Lock()
		for _, id := range c.stale {
			if _, err := c.docker.ContainerRemove(rctx, id, client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
				errs = append(errs, fmt.Errorf("remove container %s: %w", id[:12], err))
			}
		}
		c.staleMu.Unlock()
		if c.network != "" {
			if _, err := c.docker.NetworkRemove(rctx, c.network, client.NetworkRemoveOptions{}); err != nil {
				errs = append(errs, fmt.Errorf("remove network %s: %w", c.netName, err))
			} else {
				c.events.Printf("removed network %s", c.netName)
			}
		}
		for _, p := range c.proxies {
			p.Close()
		}
		for _, f := range c.pxLogs {
			f.Close()
		}
		c.stopWatches()
		c.watchers.Wait()
		if c.reaper != nil {
			errs = append(errs, c.reaper.stop())
		}
		if c.status != nil {
			c.status.close()
		}
		c.docker.Close()
		if c.eventFile != nil {
			c.eventFile.Close()
		}
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

// stopContainers stops the running members among ms in parallel.
func stopContainers(ctx context.Context, ms []*containerMember) []error {
	errs := make([]error, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		if m.Running() {
			wg.Go(func() { errs[i] = m.Stop(ctx) })
		}
	}
	wg.Wait()
	return errs
}

func (c *Docker) exited(ev ExitEvent) {
	if !ev.Expected {
		fmt.Fprintf(c.opts.Log, "member %s (pid %d) exited unexpectedly: %s\n", ev.Member, ev.PID, ev.Status)
	}
	c.events.Printf("%s (pid %d) exited: %s (expected %v)", ev.Member, ev.PID, ev.Status, ev.Expected)
	if c.opts.OnExit != nil {
		c.opts.OnExit(ev)
	}
}
