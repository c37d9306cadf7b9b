package clusters

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"

	"go.etcd.io/etcd/client/pkg/v3/types"
	"go.etcd.io/etcd/server/v3/etcdserver/api/membership"

	"github.com/etcd-chaosbench/chaosbench/clusters/proxy"
)

// EmbedOptions configures an embedded cluster.
type EmbedOptions struct {
	// Members is the cluster size: 1, 3 or 5.
	Members int
	// Dir is the run directory; members keep data and logs under Dir/members.
	Dir string
	// EtcdFlags are passed to every member (see ParseEtcdFlags).
	EtcdFlags []EtcdFlag
	// Command starts a member: the etcd flags are appended to it. The default re-executes the current
	// binary in member mode: [os.Executable(), "member"]. An etcd binary works too: [path/to/etcd].
	Command []string
	// MemberCommands, when set, gives each member its own command (one per member: mixed etcd versions);
	// it overrides Command.
	MemberCommands [][]string
	// Token is the initial cluster token (default "chaosbench").
	Token string
	// TLS makes members serve clients over mutual TLS, as kube-apiserver's etcd does; certificates are
	// generated under Dir/tls.
	TLS bool
	// Log receives progress messages (member started, member exited unexpectedly); nil discards them.
	Log io.Writer
	// OnExit, when set, is called whenever a member process ends (crashes included).
	OnExit func(ExitEvent)
	// StartTimeout bounds the wait for the new cluster to become healthy (default 60 s).
	StartTimeout time.Duration

	// SlowFS, when set, serves every member's data directory through a slowfs mount (a FUSE loopback
	// filesystem run by a helper process, see package slowfs), so that disk faults can slow its fsyncs and
	// drop its unsynced writes. Off by default: FUSE costs every disk operation a round trip through the
	// helper, which a plain benchmark must not pay.
	SlowFS *SlowFSOptions
	// ClientProxies puts a proxy in front of every member's client port as well (members advertise it),
	// so that faults can cut a member off from its clients. Off by default: clients talk to members
	// directly.
	ClientProxies bool
	// Seed seeds the jitter of the proxies and disks, so that a run's faults replay with its seed.
	Seed uint64
	// Failpoints serves each member's gofail failpoints on a loopback port of its own (GOFAIL_HTTP): the
	// members must run failpoint builds (etcdbuild.Release.Failpoints).
	Failpoints bool
}

// SlowFSOptions configures the slowfs mounts of an embedded cluster.
type SlowFSOptions struct {
	// TrackUnsynced keeps undo logs of unsynced writes so that a killed member can lose them (see
	// slowfs.FS.Crash). It costs a read per write.
	TrackUnsynced bool
	// Command starts a helper; the default re-executes the current binary: [os.Executable(), "slowfs"].
	Command []string
}

// Embedded is a cluster of member processes on loopback, started and owned by chaosbench.
type Embedded struct {
	opts       EmbedOptions
	startExits chan ExitEvent // members that exited while starting is set
	starting   atomic.Bool
	members    []*procMember
	proxies    []*proxy.Proxy
	clientPx   []*proxy.Proxy // nil unless ClientProxies
	pxLogs     []*os.File     // the proxies' connection logs
	spawner    *spawner
	status     *statusClient
	clientTLS  *tls.Config
	tlsFiles   TLSFiles // client side, when TLS is on
	auth       *Auth    // set once by EnableAuth, before any other client connects

	closeOnce sync.Once
	closeErr  error
}

var _ Cluster = (*Embedded)(nil)

// StartEmbedded starts a new cluster and waits until it is healthy. On failure everything started is
// stopped again.
func StartEmbedded(ctx context.Context, opts EmbedOptions) (*Embedded, error) {
	switch opts.Members {
	case 1, 3, 5:
	default:
		return nil, outcome.Usagef("--members %d: an embedded cluster has 1, 3 or 5 members", opts.Members)
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
	if len(opts.MemberCommands) != 0 && len(opts.MemberCommands) != opts.Members {
		return nil, outcome.Usagef("--etcd-version: give one version, or one per member (%d)", opts.Members)
	}
	if len(opts.Command) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find own executable for member processes: %w", err)
		}
		opts.Command = []string{exe, MemberCommand}
	}
	dir, err := filepath.Abs(filepath.Join(opts.Dir, "members"))
	if err != nil {
		return nil, fmt.Errorf("members dir: %w", err)
	}
	if err := probeSockDiag(); err != nil {
		fmt.Fprintf(opts.Log, "warning: peer connections without X-Server-From (lease forwarding, version probes) "+
			"cannot be attributed to their member, so partitions will not cut them: %v\n", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create members dir: %w", err)
	}

	var serverTLS, clientTLS TLSFiles
	if opts.TLS {
		if serverTLS, clientTLS, err = GenerateTLS(filepath.Join(opts.Dir, "tls")); err != nil {
			return nil, err
		}
	}
	// Ports are probed free and then bound by etcd: another program can take one in between. A member
	// that fails on that is retried with fresh ports; any other start-up failure is reported at once.
	for attempt := 1; ; attempt++ {
		c, err := startOnce(ctx, opts, dir, serverTLS, clientTLS)
		if err == nil || attempt == 3 || !errors.Is(err, errPortTaken) || ctx.Err() != nil {
			return c, err
		}
		fmt.Fprintf(opts.Log, "a member's port was taken during start-up; retrying with fresh ports\n")
		for i := range opts.Members {
			os.RemoveAll(filepath.Join(dir, fmt.Sprintf("m%d.etcd", i+1)))
		}
	}
}

// errPortTaken marks a start-up failure caused by a port another program bound first.
var errPortTaken = errors.New("address already in use")

func startOnce(ctx context.Context, opts EmbedOptions, dir string, serverTLS, clientTLS TLSFiles) (*Embedded, error) {
	c := &Embedded{opts: opts, startExits: make(chan ExitEvent, opts.Members)}
	c.starting.Store(true)
	if opts.TLS {
		var err error
		c.tlsFiles = clientTLS
		if c.clientTLS, err = clientTLS.ClientConfig(); err != nil {
			return nil, err
		}
	}
	c.spawner, c.status = newSpawner(), newStatusClient(c.clientTLS)
	fail := func(err error) (*Embedded, error) {
		c.Close(context.Background())
		return nil, err
	}
	if err := c.layout(dir, serverTLS); err != nil {
		return fail(err)
	}
	for _, m := range c.members {
		if err := c.mountDisk(ctx, m); err != nil {
			c.Close(context.Background())
			return nil, fmt.Errorf("start cluster: %w", err)
		}
		if err := m.Start(ctx); err != nil {
			return fail(fmt.Errorf("start cluster: %w", err))
		}
	}
	wctx, cancel := context.WithTimeout(ctx, opts.StartTimeout)
	defer cancel()
	healthy := make(chan error, 1)
	go func() { healthy <- c.WaitHealthy(wctx) }()
	select {
	case err := <-healthy:
		if err != nil {
			return fail(fmt.Errorf("start cluster: %w (member logs in %s)", err, dir))
		}
	case ev := <-c.startExits:
		cancel()
		<-healthy
		why := lastLogError(filepath.Join(dir, ev.Member+".log"))
		err := fmt.Errorf("start cluster: member %s exited during start-up (%s): %s", ev.Member, ev.Status, why)
		if strings.Contains(why, errPortTaken.Error()) {
			err = fmt.Errorf("%w: %w", err, errPortTaken)
		}
		return fail(err)
	}
	c.starting.Store(false)
	return c, nil
}

// lastLogError returns the last error an etcd member logged (the last log line with an error field,
// whatever its level: etcd logs some fatal conditions as warnings before exiting), or its last log line.
// Lines that are not etcd's JSON count too, after those: gofail's endpoint and the Go runtime write plain
// text ("listen tcp 127.0.0.1:42465: bind: address already in use" before etcd logs anything); a port
// taken is returned whatever else was logged, since start-up retries on it.
func lastLogError(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "no log"
	}
	var last, lastLine, lastPlain, portTaken, panicked string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var entry struct{ Level, Msg, Error string }
		if json.Unmarshal([]byte(line), &entry) != nil {
			if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "=== chaosbench:") {
				lastPlain = line
				if strings.Contains(line, errPortTaken.Error()) {
					portTaken = line
				}
				if strings.HasPrefix(line, "panic:") || strings.HasPrefix(line, "fatal error:") {
					panicked = line // not the goroutine stacks after it
				}
			}
			continue
		}
		lastLine = line
		if entry.Error != "" || entry.Level == "fatal" || entry.Level == "panic" {
			last = strings.TrimSpace(entry.Msg + ": " + entry.Error)
		}
	}
	last = cmp.Or(portTaken, last, panicked, lastLine, lastPlain)
	if len(last) > 400 {
		last = last[:400] + "..."
	}
	return last
}

// layout picks ports, starts the peer proxies and builds each member's command line.
func (c *Embedded) layout(dir string, serverTLS TLSFiles) error {
	as, initial, err := c.listen(dir)
	if err != nil {
		return err
	}
	for i, a := range as {
		c.members = append(c.members, c.newMember(dir, i, a, initial, serverTLS))
	}
	return nil
}

// memberAddrs are the loopback addresses of one embedded member: where it listens, and the client address
// it advertises (its client proxy's, when there is one).
type memberAddrs struct{ client, peer, metrics, advertised, failpoints string }

// listen picks every member's ports and starts the proxies in front of them. It returns the members'
// addresses and the --initial-cluster entries, which name the peer proxies: peers reach each other only
// through them, so that network faults can cut, slow and reset every link.
func (c *Embedded) listen(dir string) (as []memberAddrs, initial []string, err error) {
	n := c.opts.Members
	perMember := 3
	if c.opts.Failpoints {
		perMember = 4
	}
	// The members' ports stay bound while the proxies pick theirs, which would otherwise be free to
	// take one of them (seen: a member's failpoint port given to a peer proxy, the member failing to bind).
	ports, release, err := holdPorts(perMember * n)
	if err != nil {
		return nil, nil, err
	}
	defer release()
	as = make([]memberAddrs, n)
	for i := range n {
		as[i] = memberAddrs{
			client:  fmt.Sprintf("127.0.0.1:%d", ports[perMember*i]),
			peer:    fmt.Sprintf("127.0.0.1:%d", ports[perMember*i+1]),
			metrics: fmt.Sprintf("http://127.0.0.1:%d", ports[perMember*i+2]),
		}
		if c.opts.Failpoints {
			as[i].failpoints = fmt.Sprintf("127.0.0.1:%d", ports[perMember*i+3])
		}
		as[i].advertised = as[i].client
		// Connections without X-Server-From are told apart by the process that opened them.
		pxLog, err := c.proxyLog(dir, fmt.Sprintf("m%d.proxy.log", i+1))
		if err != nil {
			return nil, nil, err
		}
		p, err := proxy.Listen("127.0.0.1:0", as[i].peer, proxy.Options{Identify: c.identifySender, Seed: c.opts.Seed + uint64(i), Log: pxLog})
		if err != nil {
			return nil, nil, err
		}
		c.proxies = append(c.proxies, p)
		initial = append(initial, fmt.Sprintf("m%d=http://%s", i+1, p.Addr()))
		if c.opts.ClientProxies {
			cpLog, err := c.proxyLog(dir, fmt.Sprintf("m%d.client-proxy.log", i+1))
			if err != nil {
				return nil, nil, err
			}
			cp, err := proxy.Listen("127.0.0.1:0", as[i].client, proxy.Options{Seed: c.opts.Seed + 100 + uint64(i), Log: cpLog})
			if err != nil {
				return nil, nil, err
			}
			c.clientPx = append(c.clientPx, cp)
			as[i].advertised = cp.Addr()
		}
	}
	return as, initial, nil
}

// newMember builds member i's process: its command line (its own command when members run mixed
// versions), its environment (GOFAIL_HTTP for a failpoint build) and its raft id. It starts nothing.
func (c *Embedded) newMember(dir string, i int, a memberAddrs, initial []string, serverTLS TLSFiles) *procMember {
	name := fmt.Sprintf("m%d", i+1)
	scheme := "http"
	if c.opts.TLS {
		scheme = "https"
	}
	m := &procMember{
		name:       name,
		clientURL:  scheme + "://" + a.advertised,
		peerURL:    "http://" + c.proxies[i].Addr(),
		metricsURL: a.metrics,
		dataDir:    filepath.Join(dir, name+".etcd"),
		logPath:    filepath.Join(dir, name+".log"),
		spawner:    c.spawner,
		onExit:     c.exited,
		env:        os.Environ(),
	}
	if a.failpoints != "" {
		m.env = append(m.env, "GOFAIL_HTTP="+a.failpoints)
		m.failpointURL = "http://" + a.failpoints
	}
	args := []string{
		"--name=" + name,
		"--data-dir=" + m.dataDir,
		"--listen-client-urls=" + scheme + "://" + a.client,
		"--advertise-client-urls=" + m.clientURL,
		"--listen-peer-urls=http://" + a.peer,
		"--initial-advertise-peer-urls=" + m.peerURL,
		"--listen-metrics-urls=" + m.metricsURL,
		"--initial-cluster=" + strings.Join(initial, ","),
		"--initial-cluster-state=new",
		"--initial-cluster-token=" + c.opts.Token,
		"--log-outputs=stderr",
	}
	if c.opts.TLS {
		args = append(args, "--cert-file="+serverTLS.Cert, "--key-file="+serverTLS.Key,
			"--trusted-ca-file="+serverTLS.CA, "--client-cert-auth=true")
	}
	for _, f := range c.opts.EtcdFlags {
		args = append(args, f.Arg())
	}
	command := c.opts.Command
	if len(c.opts.MemberCommands) > 0 {
		command = c.opts.MemberCommands[i]
	}
	m.argv = append(append([]string{}, command...), args...)
	// etcd derives a new cluster's member ids from the peer URLs and the cluster token; knowing them
	// before the members start lets the proxies attribute every connection from the first one on
	// (connections opened at start-up, such as version probes, are kept alive and reused).
	if urls, err := types.NewURLs([]string{m.peerURL}); err == nil {
		m.setID(uint64(membership.NewMember(name, urls, c.opts.Token, nil).ID))
	}
	return m
}

// proxyLog opens a proxy's connection log in the members directory.
func (c *Embedded) proxyLog(dir, name string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("proxy log: %w", err)
	}
	c.pxLogs = append(c.pxLogs, f)
	return f, nil
}

func (c *Embedded) exited(ev ExitEvent) {
	if c.starting.Load() && !ev.Expected {
		select {
		case c.startExits <- ev:
		default:
		}
		return
	}
	if !ev.Expected {
		fmt.Fprintf(c.opts.Log, "member %s (pid %d) exited unexpectedly: %s\n", ev.Member, ev.PID, ev.Status)
	}
	if c.opts.OnExit != nil {
		c.opts.OnExit(ev)
	}
}

// freePorts returns n distinct free TCP ports on loopback. All n listeners are held open together so that
// the kernel cannot hand out one port twice; a port can still be taken by another program between our
// close and etcd's bind, which a member start then reports.
func freePorts(n int) ([]int, error) {
	ports, release, err := holdPorts(n)
	release()
	return ports, err
}

// holdPorts is freePorts with the ports still held: they are bound until release, so that listeners this
// process opens meanwhile on port 0 (the peer proxies) cannot be given one of them.
func holdPorts(n int) ([]int, func(), error) {
	var lns []net.Listener
	release := func() {
		for _, ln := range lns {
			ln.Close()
		}
	}
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			release()
			return nil, func() {}, fmt.Errorf("find a free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, release, nil
}

// Backend returns "embed".
func (c *Embedded) Backend() string { return "embed" }

// Members returns the members; each is a Process.
func (c *Embedded) Members() []Member {
	out := make([]Member, len(c.members))
	for i, m := range c.members {
		out[i] = m
	}
	return out
}

// Endpoints returns the members' client URLs.
func (c *Embedded) Endpoints() []string {
	out := make([]string, len(c.members))
	for i, m := range c.members {
		out[i] = m.clientURL
	}
	return out
}

// TLS returns the client TLS configuration, or nil when members serve plaintext.
func (c *Embedded) TLS() *tls.Config { return c.clientTLS }

func (c *Embedded) authInfo() *Auth { return c.auth }
func (c *Embedded) setAuth(a *Auth) { c.auth = a; c.status.setAuth(a) }

// ClientTLSFiles returns the client certificate files when members serve TLS (for etcdctl and tests).
func (c *Embedded) ClientTLSFiles() (TLSFiles, bool) { return c.tlsFiles, c.opts.TLS }

// ClientProxy returns the client proxy in front of the named member, or nil when the cluster has none
// (see EmbedOptions.ClientProxies).
func (c *Embedded) ClientProxy(member string) *proxy.Proxy {
	for i, m := range c.members {
		if m.name == member && i < len(c.clientPx) {
			return c.clientPx[i]
		}
	}
	return nil
}

// Proxy returns the peer proxy in front of the named member, or nil.
func (c *Embedded) Proxy(member string) *proxy.Proxy {
	for i, m := range c.members {
		if m.name == member {
			return c.proxies[i]
		}
	}
	return nil
}

// Leader asks every running member for its status and returns the leader of the highest term seen.
func (c *Embedded) Leader(ctx context.Context) (Member, error) {
	return c.status.leader(ctx, c.running())
}

// WaitHealthy waits until every running member serves linearizable reads and all agree on one leader.
func (c *Embedded) WaitHealthy(ctx context.Context) error {
	return c.status.waitHealthy(ctx, c.running)
}

func (c *Embedded) running() []Member {
	var out []Member
	for _, m := range c.members {
		if m.Running() {
			out = append(out, m)
		}
	}
	return out
}

// Close stops every member (gracefully, then by force), closes the proxies and ends the spawner thread.
// Followers stop first: a leader stopped while its followers run spends up to five seconds trying to hand
// leadership over to members that are going away themselves. Data directories and logs stay in the run
// directory.
func (c *Embedded) Close(ctx context.Context) error {
	c.closeOnce.Do(func() {
		lctx, cancel := context.WithTimeout(ctx, probeTimeout)
		leader, _ := c.Leader(lctx)
		cancel()
		var followers, last []*procMember
		for _, m := range c.members {
			if leader != nil && m.Name() == leader.Name() {
				last = append(last, m)
			} else {
				followers = append(followers, m)
			}
		}
		errs := append(stopAll(ctx, followers), stopAll(ctx, last)...)
		errs = append(errs, c.unmountDisks(ctx)...)
		for _, p := range append(c.proxies, c.clientPx...) {
			p.Close()
		}
		for _, f := range c.pxLogs {
			f.Close()
		}
		c.status.close()
		c.spawner.close()
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

// stopAll stops the running members among ms in parallel.
func stopAll(ctx context.Context, ms []*procMember) []error {
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

// FailpointURL returns the base URL of member's gofail endpoint ("" when the cluster was started without
// Failpoints, or there is no such member).
func (c *Embedded) FailpointURL(member string) string {
	for _, m := range c.members {
		if m.name == member {
			return m.failpointURL
		}
	}
	return ""
}

// StoppedByFault reports whether member is down because a fault asked it to stop (a kill, a stop), not by
// a crash or a failpoint's panic.
func (c *Embedded) StoppedByFault(member string) bool {
	for _, m := range c.members {
		if m.name == member {
			return m.stoppedByFault()
		}
	}
	return false
}

// ExpectCrash tells the cluster that member's process may end by a failpoint's panic (expect true): its
// exit is then reported as expected, not as a crash, and the member is started again with Process.Start.
// ExpectCrash(member, false) withdraws that once the failpoint is disarmed.
func (c *Embedded) ExpectCrash(member string, expect bool) {
	for _, m := range c.members {
		if m.name == member {
			m.expectCrash(expect)
		}
	}
}
