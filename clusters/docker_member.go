package clusters

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"
	"github.com/testcontainers/testcontainers-go"
	"github.com/testcontainers/testcontainers-go/wait"

	"github.com/etcd-chaosbench/chaosbench/clusters/slowfs"
)

// containerMember is a member running in a container. Its lifecycle goes through the Docker client that
// testcontainers-go exposes (testcontainers' Container has no kill or pause), and mirrors procMember's: an
// exit watcher per start tells crashes from requested exits, and the container's output is appended to
// the member's log file in the run directory.
type containerMember struct {
	cluster    *Docker
	name       string
	ip         netip.Addr
	image      EtcdImage
	clientURL  string
	peerURL    string
	metricsURL string
	dataDir    string // on the host, bind-mounted at containerDataDir
	logPath    string
	args       []string // etcd flags, after the image's entrypoint
	id         atomic.Uint64
	ctr        *testcontainers.DockerContainer
	gen        int // how many times the member moved to another image (see setImage)

	mu       sync.Mutex
	running  bool
	paused   bool
	stopping bool // an exit was asked for (a kill, a stop): not a crash; never withdrawn
	mayPanic bool // a failpoint armed to panic may end the process (withdrawn when disarmed)
	pid      int  // host PID of the member process while it runs
	exited   chan struct{}
	disk     *slowfs.FS // the slowfs mount on dataDir, when the cluster uses slowfs
}

var _ Process = (*containerMember)(nil)

func (m *containerMember) Name() string       { return m.name }
func (m *containerMember) ID() uint64         { return m.id.Load() }
func (m *containerMember) ClientURL() string  { return m.clientURL }
func (m *containerMember) PeerURL() string    { return m.peerURL }
func (m *containerMember) DataDir() string    { return m.dataDir }
func (m *containerMember) MetricsURL() string { return m.metricsURL }
func (m *containerMember) String() string     { return m.name }
func (m *containerMember) setID(id uint64)    { m.id.Store(id) }

// IP is the member's address on the cluster network.
func (m *containerMember) IP() netip.Addr { return m.ip }

// Image is the image the member runs (its etcd version).
func (m *containerMember) Image() EtcdImage {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.image
}

// ContainerID is the member's Docker container id.
func (m *containerMember) ContainerID() string { return m.ctr.GetContainerID() }

// PID returns the host PID of the member process (the container's init), or 0 when it is not running.
// strace and nsenter work on it as on any process.
func (m *containerMember) PID() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.running {
		return 0
	}
	return m.pid
}

func (m *containerMember) Running() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.running
}

// stoppedByFault reports whether the member is down because an exit was asked for (a kill, a stop), not
// by a crash or a failpoint's panic.
func (m *containerMember) stoppedByFault() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return !m.running && m.stopping
}

func (m *containerMember) Paused() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.running && m.paused
}

func (m *containerMember) docker() *client.Client { return m.cluster.docker.Client }

// create creates the member's container without starting it.
func (m *containerMember) create(ctx context.Context) error {
	c := m.cluster
	img := m.Image()
	labels := map[string]string{LabelMember: m.name, LabelEtcdVersion: img.Version}
	for k, v := range c.labels {
		labels[k] = v
	}
	binds := []string{m.dataDir + ":" + containerDataDir}
	if c.opts.TLS {
		binds = append(binds, filepath.Dir(c.tlsFiles.CA)+":"+containerTLSDir+":ro")
	}
	name := "chaosbench-" + c.id + "-" + m.name
	if m.gen > 0 {
		name += fmt.Sprintf("-%d", m.gen+1)
	}
	req := testcontainers.GenericContainerRequest{
		ContainerRequest: testcontainers.ContainerRequest{
			Image:    img.Ref,
			Cmd:      m.args,
			Labels:   labels,
			Name:     name,
			Networks: []string{c.netName},
			ConfigModifier: func(cfg *container.Config) {
				cfg.Hostname = m.name
				if len(img.Failpoints) > 0 {
					cfg.Env = append(cfg.Env, fmt.Sprintf("GOFAIL_HTTP=0.0.0.0:%d", dockerFailpointPort))
				}
				// The member writes its bind-mounted data directory as the user running chaosbench.
				cfg.User = fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
			},
			HostConfigModifier: func(hc *container.HostConfig) {
				hc.NetworkMode = container.NetworkMode(c.netName)
				hc.Binds = binds
				hc.NanoCPUs = int64(c.opts.CPUs * 1e9)
				if c.opts.Memory > 0 {
					hc.Memory, hc.MemorySwap = c.opts.Memory, c.opts.Memory
				}
			},
			EndpointSettingsModifier: func(eps map[string]*network.EndpointSettings) {
				ep := eps[c.netName]
				if ep == nil {
					ep = &network.EndpointSettings{}
					eps[c.netName] = ep
				}
				ep.IPAMConfig = &network.EndpointIPAMConfig{IPv4Address: m.ip}
			},
		},
		Logger: c.events,
	}
	ctr, err := testcontainers.GenericContainer(ctx, req)
	if dc, ok := ctr.(*testcontainers.DockerContainer); ok && dc != nil {
		m.ctr = dc
	}
	if err != nil {
		return fmt.Errorf("create container for %s (%s): %w", m.name, img.Ref, err)
	}
	if m.ctr == nil {
		return fmt.Errorf("create container for %s: unexpected container type %T", m.name, ctr)
	}
	c.events.Printf("created %s: container %s, image %s, ip %s, cpus %g, memory %d", m.name, m.ctr.GetContainerID()[:12],
		img.Ref, m.ip, c.opts.CPUs, c.opts.Memory)
	return nil
}

// Start starts the member's container on its existing data directory, address and flags, and returns once
// the member process listens for clients (not once it serves them: that takes a quorum).
func (m *containerMember) Start(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if m.ctr == nil {
		return fmt.Errorf("start %s: no container", m.name)
	}
	id := m.ctr.GetContainerID()
	m.mu.Lock()
	if m.running {
		m.mu.Unlock()
		return fmt.Errorf("start %s: already running (pid %d)", m.name, m.pid)
	}
	m.appendLog(fmt.Sprintf("=== chaosbench: starting %s (container %s, %s) at %s\n", m.name, id[:12], m.image.Ref, time.Now().Format(time.RFC3339Nano)))
	// The wait is registered before the start, as the Docker API intends, so no exit can be missed.
	wctx, cancelWait := context.WithCancel(m.cluster.watchCtx)
	exit := m.docker().ContainerWait(wctx, id, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	since := time.Now()
	if _, err := m.docker().ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		cancelWait()
		m.mu.Unlock()
		return fmt.Errorf("start %s: %w", m.name, err)
	}
	pid := 0
	if info, err := m.docker().ContainerInspect(ctx, id, client.ContainerInspectOptions{}); err == nil && info.Container.State != nil {
		pid = info.Container.State.Pid
	}
	exited := make(chan struct{})
	m.running, m.paused, m.stopping, m.mayPanic, m.pid, m.exited = true, false, false, false, pid, exited
	m.mu.Unlock()

	m.cluster.watchers.Add(2)
	go m.watch(exit, exited, cancelWait)
	go m.follow(since)

	lctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := (listening{member: m}).WaitUntilReady(lctx, m.ctr); err != nil {
		return fmt.Errorf("start %s: %w", m.name, err)
	}
	return nil
}

// watch waits for the container started last to exit and records how it ended.
func (m *containerMember) watch(exit client.ContainerWaitResult, exited chan struct{}, cancelWait context.CancelFunc) {
	defer m.cluster.watchers.Done()
	defer cancelWait()
	status := ""
	select {
	case res := <-exit.Result:
		status = fmt.Sprintf("exit code %d", res.StatusCode)
		if res.StatusCode == 137 {
			status += " (SIGKILL)"
		}
		if res.Error != nil && res.Error.Message != "" {
			status += ": " + res.Error.Message
		}
		ictx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		if info, err := m.docker().ContainerInspect(ictx, m.ctr.GetContainerID(), client.ContainerInspectOptions{}); err == nil &&
			info.Container.State != nil && info.Container.State.OOMKilled {
			status += fmt.Sprintf(", out of memory (limit %d bytes)", m.cluster.opts.Memory)
		}
		cancel()
	case err := <-exit.Error:
		status = "lost track of the container: " + err.Error()
	}
	m.mu.Lock()
	ev := ExitEvent{Member: m.name, PID: m.pid, Time: time.Now(), Status: status, Expected: m.stopping || m.mayPanic, Log: m.logPath}
	m.running, m.paused, m.pid = false, false, 0
	m.mu.Unlock()
	m.appendLog(fmt.Sprintf("=== chaosbench: %s (pid %d) ended at %s: %s\n", m.name, ev.PID, ev.Time.Format(time.RFC3339Nano), status))
	close(exited)
	m.cluster.exited(ev)
}

// follow appends the container's output since the given start to the member's log file, until the
// container stops or the cluster is closed.
func (m *containerMember) follow(since time.Time) {
	defer m.cluster.watchers.Done()
	rc, err := m.docker().ContainerLogs(m.cluster.watchCtx, m.ctr.GetContainerID(), client.ContainerLogsOptions{
		ShowStdout: true, ShowStderr: true, Follow: true,
		Since: fmt.Sprintf("%d.%09d", since.Unix(), since.Nanosecond()),
	})
	if err != nil {
		m.appendLog(fmt.Sprintf("=== chaosbench: cannot follow the logs of %s: %v\n", m.name, err))
		return
	}
	defer rc.Close()
	f, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	stdcopy.StdCopy(f, f, rc)
}

func (m *containerMember) appendLog(line string) {
	f, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return
	}
	f.WriteString(line)
	f.Close()
}

// expectExit marks the coming exit as requested and returns the channel closed when it happens.
func (m *containerMember) expectExit() (<-chan struct{}, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.running {
		return nil, false, fmt.Errorf("%s is not running", m.name)
	}
	m.stopping = true
	return m.exited, m.paused, nil
}

// Kill sends SIGKILL to the member process and waits for the container to stop.
func (m *containerMember) Kill(ctx context.Context) error {
	exited, _, err := m.expectExit()
	if err != nil {
		return fmt.Errorf("kill: %w", err)
	}
	if _, err := m.docker().ContainerKill(ctx, m.ctr.GetContainerID(), client.ContainerKillOptions{Signal: "SIGKILL"}); err != nil && !notRunning(err) {
		return fmt.Errorf("kill %s: %w", m.name, err)
	}
	select {
	case <-exited:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("kill %s: waiting for exit: %w", m.name, ctx.Err())
	}
}

// Stop sends SIGTERM (after unpausing) and waits for a graceful exit, killing the member if it does not
// exit within ctx or 10 seconds.
func (m *containerMember) Stop(ctx context.Context) error {
	exited, paused, err := m.expectExit()
	if err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	id := m.ctr.GetContainerID()
	if paused {
		if err := m.Resume(ctx); err != nil {
			return fmt.Errorf("stop: %w", err)
		}
	}
	if _, err := m.docker().ContainerKill(ctx, id, client.ContainerKillOptions{Signal: "SIGTERM"}); err != nil && !notRunning(err) {
		return fmt.Errorf("stop %s: %w", m.name, err)
	}
	grace := time.NewTimer(stopGrace)
	defer grace.Stop()
	select {
	case <-exited:
		return nil
	case <-grace.C:
	case <-ctx.Done():
	}
	// Too slow to stop: kill it, without the (possibly ended) ctx; SIGKILL is prompt.
	kctx, cancel := context.WithTimeout(context.Background(), removeTimeout)
	defer cancel()
	if _, err := m.docker().ContainerKill(kctx, id, client.ContainerKillOptions{Signal: "SIGKILL"}); err != nil && !notRunning(err) {
		return fmt.Errorf("stop %s: kill after the grace period: %w", m.name, err)
	}
	select {
	case <-exited:
		return nil
	case <-kctx.Done():
		return fmt.Errorf("stop %s: %w", m.name, kctx.Err())
	}
}

// Restart stops the member gracefully and starts it again.
func (m *containerMember) Restart(ctx context.Context) error {
	if m.Running() {
		if err := m.Stop(ctx); err != nil {
			return fmt.Errorf("restart: %w", err)
		}
	}
	return m.Start(ctx)
}

// Pause freezes the container (the cgroup freezer, as `docker pause`); it returns once every task is
// frozen.
func (m *containerMember) Pause(ctx context.Context) error {
	if !m.Running() {
		return fmt.Errorf("pause: %s is not running", m.name)
	}
	if _, err := m.docker().ContainerPause(ctx, m.ctr.GetContainerID(), client.ContainerPauseOptions{}); err != nil {
		return fmt.Errorf("pause %s: %w", m.name, err)
	}
	m.mu.Lock()
	m.paused = true
	m.mu.Unlock()
	return nil
}

// Resume thaws the container.
func (m *containerMember) Resume(ctx context.Context) error {
	if !m.Running() {
		return fmt.Errorf("resume: %s is not running", m.name)
	}
	if _, err := m.docker().ContainerUnpause(ctx, m.ctr.GetContainerID(), client.ContainerUnpauseOptions{}); err != nil {
		return fmt.Errorf("resume %s: %w", m.name, err)
	}
	m.mu.Lock()
	m.paused = false
	m.mu.Unlock()
	return nil
}

// setImage moves the member to img: it stops the member gracefully (if it runs), creates a container of
// img with the same name, address, data directory and flags, removes the old container and starts the new
// one. The old container is kept until the new one exists, so that a failed creation leaves the member
// as it was (and started again).
func (m *containerMember) setImage(ctx context.Context, img EtcdImage) error {
	wasRunning := m.Running()
	if wasRunning {
		if err := m.Stop(ctx); err != nil {
			return fmt.Errorf("move %s to %s: %w", m.name, img.Label(), err)
		}
	}
	old, oldImg := m.ctr, m.Image()
	m.mu.Lock()
	m.image = img
	m.mu.Unlock()
	m.gen++
	if err := m.create(ctx); err != nil {
		m.mu.Lock()
		m.image = oldImg
		m.mu.Unlock()
		m.gen--
		m.ctr = old
		if wasRunning {
			// Even when ctx ended (the run stops): a member left stopped would be a fault never healed.
			sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
			err = errors.Join(err, m.Start(sctx))
			cancel()
		}
		return fmt.Errorf("move %s to %s: %w", m.name, img.Label(), err)
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), removeTimeout)
	defer cancel()
	if _, err := m.docker().ContainerRemove(rctx, old.GetContainerID(), client.ContainerRemoveOptions{Force: true}); err != nil && !cerrdefs.IsNotFound(err) {
		m.cluster.events.Printf("could not remove %s's old container %s: %v", m.name, old.GetContainerID()[:12], err)
		m.cluster.addStale(old.GetContainerID())
	}
	m.cluster.events.Printf("moved %s from %s to %s", m.name, oldImg.Ref, img.Ref)
	if err := m.Start(ctx); err != nil {
		return fmt.Errorf("move %s to %s: %w", m.name, img.Label(), err)
	}
	return nil
}

// remove removes the container (killing it if it still runs) and waits for its exit to be recorded.
func (m *containerMember) remove(ctx context.Context) error {
	if m.ctr == nil {
		return nil
	}
	m.mu.Lock()
	m.stopping = true
	exited := m.exited
	m.mu.Unlock()
	id := m.ctr.GetContainerID()
	// testcontainers' Terminate stops (at once: the member was stopped in order before) and removes the
	// container; a container it cannot stop (paused, say) is removed by force.
	if err := m.ctr.Terminate(ctx, testcontainers.StopContext(ctx), testcontainers.StopTimeout(0)); err != nil {
		_, err := m.docker().ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		if err != nil && !cerrdefs.IsNotFound(err) {
			return fmt.Errorf("remove container of %s: %w", m.name, err)
		}
	}
	m.cluster.events.Printf("removed %s: container %s", m.name, id[:12])
	if exited != nil {
		select {
		case <-exited:
		case <-ctx.Done():
		}
	}
	return nil
}

// lastLogs returns the last lines the container printed, for errors about members that would not start.
func (m *containerMember) lastLogs(ctx context.Context, n int) string {
	rc, err := m.docker().ContainerLogs(ctx, m.ctr.GetContainerID(), client.ContainerLogsOptions{
		ShowStdout: true, ShowStderr: true, Tail: fmt.Sprint(n),
	})
	if err != nil {
		return ""
	}
	defer rc.Close()
	var buf bytes.Buffer
	stdcopy.StdCopy(&buf, &buf, rc)
	return strings.TrimSpace(buf.String())
}

func notRunning(err error) bool {
	return cerrdefs.IsConflict(err) || strings.Contains(err.Error(), "is not running")
}

// listening is the wait strategy of a member start: the member process accepts TCP connections on its
// client port. It is the readiness that holds for members starting one by one: etcd logs "ready to serve
// client requests" only once a quorum is up. A container that exits meanwhile fails the wait with its last
// log lines.
type listening struct{ member *containerMember }

var _ wait.Strategy = listening{}

func (l listening) WaitUntilReady(ctx context.Context, target wait.StrategyTarget) error {
	addr := netip.AddrPortFrom(l.member.ip, dockerClientPort).String()
	for {
		state, err := target.State(ctx)
		if err != nil {
			return fmt.Errorf("wait for %s to listen: %w", addr, err)
		}
		if !state.Running {
			return l.failed(state)
		}
		conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
		if err == nil {
			conn.Close()
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("member does not listen on %s: %w (is the container network reachable from this host?)", addr, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (l listening) failed(state *container.State) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	what := fmt.Sprintf("member exited (code %d)", state.ExitCode)
	if state.OOMKilled {
		what = "member ran out of memory (--member-memory)"
	}
	if logs := l.member.lastLogs(ctx, 8); logs != "" {
		return errors.New(what + "; its last output:\n" + indent(logs))
	}
	return errors.New(what)
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
