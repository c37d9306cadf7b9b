package clusters

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-chaosbench/chaosbench/internal/testenv"
)

// The releases the container tests run: one 3.5 and one 3.6, as users compare them. They are built from the
// module proxy once (about a minute each, cold) and cached in the user's cache dir; their images are built
// once per engine and shared by every test binary.
const (
	testV35 = "v3.5.35"
	testV36 = "v3.6.16"
)

// dockerImages resolves and builds the test images once per test binary.
var dockerImages = sync.OnceValues(func() (map[string]EtcdImage, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	d, err := DockerClient(ctx)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	out := map[string]EtcdImage{}
	for _, v := range []string{testV35, testV36} {
		img, err := ResolveImage(ctx, v, ImageOptions{Log: os.Stderr})
		if err != nil {
			return nil, err
		}
		if _, err := EnsureImage(ctx, d.Client, img, os.Stderr); err != nil {
			return nil, err
		}
		out[v] = img
	}
	return out, nil
})

// requireDocker skips the test where no Docker engine answers (CI machines have one).
func requireDocker(t *testing.T) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := DockerClient(ctx)
	if err != nil {
		testenv.Missing(t, testenv.Docker, "skipping: container tests need a Docker engine, and none answers here: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d.Client
}

func testImage(t *testing.T, version string) EtcdImage {
	t.Helper()
	imgs, err := dockerImages()
	if err != nil {
		t.Fatalf("build test images: %v", err)
	}
	return imgs[version]
}

// startDockerCluster starts a cluster whose removal the test checks: after Close no container, network or
// volume of it may remain, its data stays readable by this user, and nothing is mounted under its directory.
func startDockerCluster(t *testing.T, images []EtcdImage, flags ...string) (*Docker, string) {
	t.Helper()
	d := requireDocker(t)
	ef, err := splitEtcdFlags(flags)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := StartDocker(ctx, DockerOptions{Members: len(images), Dir: dir, Images: images, EtcdFlags: ef, Log: testWriter{t}})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
		assertNoLeftovers(t, d, c.ID(), dir)
	})
	return c, dir
}

func assertNoLeftovers(t *testing.T, d *client.Client, clusterID, dir string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	filter := make(client.Filters).Add("label", LabelCluster+"="+clusterID)
	cs, err := d.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filter})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := d.NetworkList(ctx, client.NetworkListOptions{Filters: filter})
	if err != nil {
		t.Fatal(err)
	}
	vs, err := d.VolumeList(ctx, client.VolumeListOptions{Filters: filter})
	if err != nil {
		t.Fatal(err)
	}
	if len(cs.Items)+len(ns.Items)+len(vs.Items) > 0 {
		t.Errorf("cluster %s left %d containers, %d networks, %d volumes behind", clusterID, len(cs.Items), len(ns.Items), len(vs.Items))
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	if strings.Contains(string(mounts), dir) {
		t.Errorf("something is still mounted under %s", dir)
	}
	// The members wrote their data as this user: the run directory stays removable without root.
	err = filepath.Walk(filepath.Join(dir, "members"), func(path string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
			return fmt.Errorf("%s is owned by uid %d", path, st.Uid)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

func dockerClient(t *testing.T, endpoints ...string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func putKeys(t *testing.T, ctx context.Context, cli *clientv3.Client, prefix string, n int) {
	t.Helper()
	for i := range n {
		if _, err := cli.Put(ctx, fmt.Sprintf("%s/%03d", prefix, i), "v"); err != nil {
			t.Fatalf("put %s/%03d: %v", prefix, i, err)
		}
	}
}

// countKeys reads serializably from one member: what that member itself holds.
func countKeys(t *testing.T, ctx context.Context, endpoint, prefix string) int64 {
	t.Helper()
	cli := dockerClient(t, endpoint)
	resp, err := cli.Get(ctx, prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly(), clientv3.WithSerializable())
	if err != nil {
		t.Fatalf("count %s on %s: %v", prefix, endpoint, err)
	}
	return resp.Count
}

// TestDockerKillAndRestart runs, for a 3.5 and a 3.6 release, the member lifecycle faults rely on: the
// leader killed and restarted on its data, a follower paused and resumed, stopped and started, with the
// cluster healthy and the data complete after each step.
func TestDockerKillAndRestart(t *testing.T) {
	t.Parallel() // its own cluster; judges no latency
	for _, version := range []string{testV35, testV36} {
		t.Run(version, func(t *testing.T) {
			requireDocker(t)
			img := testImage(t, version)
			c, _ := startDockerCluster(t, []EtcdImage{img, img, img}, "heartbeat-interval=50", "election-timeout=500")
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			for _, m := range c.Members() {
				st, err := c.status.Status(ctx, m)
				if err != nil {
					t.Fatal(err)
				}
				if want := strings.TrimPrefix(version, "v"); st.Version != want {
					t.Fatalf("%s runs etcd %s, want %s", m.Name(), st.Version, want)
				}
			}
			cli := dockerClient(t, c.Endpoints()...)
			putKeys(t, ctx, cli, "before", 50)

			leader, err := c.Leader(ctx)
			if err != nil {
				t.Fatal(err)
			}
			p := leader.(Process)
			pid := p.PID()
			if pid == 0 {
				t.Fatal("running member has no PID")
			}
			if err := p.Kill(ctx); err != nil {
				t.Fatal(err)
			}
			if p.Running() || p.PID() != 0 {
				t.Fatal("killed member still running")
			}
			if _, ok := processStart(pid); ok {
				t.Fatalf("member process %d still exists after Kill", pid)
			}
			if err := c.WaitHealthy(ctx); err != nil {
				t.Fatalf("two members left should elect a leader: %v", err)
			}
			if nl, err := c.Leader(ctx); err != nil || nl.Name() == leader.Name() {
				t.Fatalf("leader after killing %s: %v, %v", leader.Name(), nl, err)
			}
			putKeys(t, ctx, cli, "during", 50)

			if err := p.Start(ctx); err != nil {
				t.Fatal(err)
			}
			if err := c.WaitHealthy(ctx); err != nil {
				t.Fatalf("after restart: %v", err)
			}
			// The restarted member kept its data (a bind mount) and caught up on what it missed.
			waitCount(t, ctx, p.ClientURL(), "before", 50)
			waitCount(t, ctx, p.ClientURL(), "during", 50)

			// Pause a follower: frozen, it answers nothing; resumed, it serves again.
			var follower Process
			now, _ := c.Leader(ctx)
			for _, q := range Processes(c) {
				if q.Name() != now.Name() {
					follower = q
					break
				}
			}
			if err := follower.Pause(ctx); err != nil {
				t.Fatal(err)
			}
			if !follower.Paused() || !follower.Running() {
				t.Fatal("paused member should be running and paused")
			}
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			_, err = c.status.Status(pctx, follower)
			pcancel()
			if err == nil {
				t.Fatal("a paused member answered a status request")
			}
			// Through the leader: a client balanced over every member would wait on the frozen one.
			putKeys(t, ctx, dockerClient(t, now.ClientURL()), "paused", 20)
			if err := follower.Resume(ctx); err != nil {
				t.Fatal(err)
			}
			waitCount(t, ctx, follower.ClientURL(), "paused", 20)

			// Stop (SIGTERM) and Restart.
			if err := follower.Stop(ctx); err != nil {
				t.Fatal(err)
			}
			if follower.Running() {
				t.Fatal("stopped member still running")
			}
			if err := follower.Restart(ctx); err != nil {
				t.Fatal(err)
			}
			if err := c.WaitHealthy(ctx); err != nil {
				t.Fatalf("after stop and restart: %v", err)
			}
			logs, err := os.ReadFile(filepath.Join(c.opts.Dir, "members", p.Name()+".log"))
			if err != nil {
				t.Fatal(err)
			}
			// The output of every start is collected, not only the first one's.
			starts := strings.Split(string(logs), "=== chaosbench: starting")
			if len(starts) < 3 {
				t.Errorf("%s's log shows %d starts, want at least 2", p.Name(), len(starts)-1)
			} else if !strings.Contains(starts[2], `"msg":"`) {
				t.Errorf("%s's log has no etcd output after its restart:\n%s", p.Name(), starts[2])
			}
			if !strings.Contains(string(logs), "exit code 137") {
				t.Errorf("%s's log does not record the kill", p.Name())
			}
		})
	}
}

func waitCount(t *testing.T, ctx context.Context, endpoint, prefix string, want int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got := countKeys(t, ctx, endpoint, prefix)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s holds %d keys under %s, want %d", endpoint, got, prefix, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestDockerMixedVersions: two 3.5 members and one 3.6 member form one cluster, each running its own
// release, and serve traffic through every member.
func TestDockerMixedVersions(t *testing.T) {
	t.Parallel() // its own cluster; judges no latency
	requireDocker(t)
	v35, v36 := testImage(t, testV35), testImage(t, testV36)
	c, _ := startDockerCluster(t, []EtcdImage{v35, v35, v36})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	want := []string{"3.5.35", "3.5.35", "3.6.16"}
	for i, m := range c.Members() {
		st, err := c.status.Status(ctx, m)
		if err != nil {
			t.Fatal(err)
		}
		if st.Version != want[i] {
			t.Errorf("%s runs etcd %s, want %s", m.Name(), st.Version, want[i])
		}
	}
	for i, ep := range c.Endpoints() {
		putKeys(t, ctx, dockerClient(t, ep), fmt.Sprintf("via-m%d", i+1), 20)
	}
	for _, ep := range c.Endpoints() {
		for i := range c.Members() {
			waitCount(t, ctx, ep, fmt.Sprintf("via-m%d", i+1), 20)
		}
	}
	// The whole cluster down, then up again one member at a time: each Start returns once its member
	// listens, without waiting for a quorum that only the next starts complete.
	for _, p := range Processes(c) {
		if err := p.Stop(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range Processes(c) {
		sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		err := p.Start(sctx)
		cancel()
		if err != nil {
			t.Fatalf("start %s alone: %v", p.Name(), err)
		}
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatalf("after starting the members one by one: %v", err)
	}
	for i := range c.Members() {
		waitCount(t, ctx, c.Endpoints()[0], fmt.Sprintf("via-m%d", i+1), 20)
	}
	// Left paused, as a fault interrupted mid-way would leave it: Close still stops and removes it.
	if err := c.members[2].Pause(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestDockerLimits: the per-member CPU and memory limits reach the containers, and a member that cannot
// start (its flags) fails the start with its own last words.
func TestDockerLimits(t *testing.T) {
	t.Parallel() // its own cluster; judges no latency
	d := requireDocker(t)
	img := testImage(t, testV36)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := StartDocker(ctx, DockerOptions{Members: 1, Dir: dir, Images: []EtcdImage{img}, CPUs: 0.5, Memory: 256 << 20})
	if err != nil {
		t.Fatal(err)
	}
	m := c.members[0]
	info, err := d.ContainerInspect(ctx, m.ContainerID(), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hc := info.Container.HostConfig
	if hc.NanoCPUs != 5e8 || hc.Memory != 256<<20 || hc.MemorySwap != 256<<20 {
		t.Errorf("limits: cpus %d, memory %d, memory+swap %d", hc.NanoCPUs, hc.Memory, hc.MemorySwap)
	}
	if got := info.Container.NetworkSettings.Networks[c.Network()].IPAddress; got != m.IP() {
		t.Errorf("member address %s, want the static %s", got, m.IP())
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	assertNoLeftovers(t, d, c.ID(), dir)

	// A flag the release parses but refuses at start-up: the member exits, and the error says why.
	bad, err := splitEtcdFlags([]string{"heartbeat-interval=1000", "election-timeout=100"})
	if err != nil {
		t.Fatal(err)
	}
	dir = t.TempDir()
	c, err = StartDocker(ctx, DockerOptions{Members: 1, Dir: dir, Images: []EtcdImage{img}, EtcdFlags: bad})
	if err == nil {
		c.Close(ctx)
		t.Fatal("a member with election-timeout < heartbeat-interval started")
	}
	if !strings.Contains(err.Error(), "member exited") || !strings.Contains(err.Error(), "election-timeout") {
		t.Errorf("error does not say why the member exited: %v", err)
	}
	ids := leftoverClusters(t, d, dir)
	if len(ids) > 0 {
		t.Errorf("a failed start left clusters %v behind", ids)
	}
}

// leftoverClusters returns the ids of clusters labelled with run directory dir that still have objects.
func leftoverClusters(t *testing.T, d *client.Client, dir string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	filter := make(client.Filters).Add("label", LabelRun+"="+dir)
	cs, err := d.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filter})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := d.NetworkList(ctx, client.NetworkListOptions{Filters: filter})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range cs.Items {
		ids = append(ids, c.Labels[LabelCluster])
	}
	for _, n := range ns.Items {
		ids = append(ids, n.Labels[LabelCluster])
	}
	return ids
}

// TestRemoveOrphans: objects whose owner process is gone are removed, objects of a live owner (this test)
// are kept and listed.
func TestRemoveOrphans(t *testing.T) {
	d := requireDocker(t)
	img := testImage(t, testV36)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	// A process that has exited: its PID is free (or reused, with another start time).
	dead := selfOwner()
	dead.PID = deadPID(t)
	live := selfOwner()
	id := newClusterID()
	labels := func(o owner) map[string]string {
		return map[string]string{LabelOwned: "true", LabelCluster: id, LabelOwner: o.String()}
	}
	deadNet, err := d.NetworkCreate(ctx, "chaosbench-test-dead-"+id, client.NetworkCreateOptions{Driver: "bridge", Labels: labels(dead)})
	if err != nil {
		t.Fatal(err)
	}
	liveNet, err := d.NetworkCreate(ctx, "chaosbench-test-live-"+id, client.NetworkCreateOptions{Driver: "bridge", Labels: labels(live)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.NetworkRemove(context.Background(), liveNet.ID, client.NetworkRemoveOptions{}) })
	deadCtr, err := d.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{Image: img.Ref, Labels: labels(dead)}, Name: "chaosbench-test-dead-" + id,
	})
	if err != nil {
		t.Fatal(err)
	}
	report, err := RemoveOrphans(ctx, d, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !contains(report.Networks, "chaosbench-test-dead-"+id) || !contains(report.Containers, "chaosbench-test-dead-"+id) {
		t.Errorf("orphans not removed: %s", report)
	}
	if contains(report.Networks, "chaosbench-test-live-"+id) {
		t.Errorf("a live run's network was removed: %s", report)
	}
	if !strings.Contains(strings.Join(report.Kept, "\n"), "chaosbench-test-live-"+id) {
		t.Errorf("the live run's network is not listed as kept: %v", report.Kept)
	}
	if _, err := d.ContainerInspect(ctx, deadCtr.ID, client.ContainerInspectOptions{}); err == nil {
		t.Error("orphan container still exists")
	}
	if _, err := d.NetworkInspect(ctx, deadNet.ID, client.NetworkInspectOptions{}); err == nil {
		t.Error("orphan network still exists")
	}
	if _, err := d.NetworkInspect(ctx, liveNet.ID, client.NetworkInspectOptions{}); err != nil {
		t.Errorf("live network gone: %v", err)
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

// deadPID returns the PID of a process that has exited and been reaped.
func deadPID(t *testing.T) int {
	t.Helper()
	p, err := os.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Wait(); err != nil {
		t.Fatal(err)
	}
	return p.Pid
}

func TestOwnerLabel(t *testing.T) {
	self := selfOwner()
	if alive, known := ownerState(self.String()); !alive || !known {
		t.Errorf("own label %s: alive %v known %v", self, alive, known)
	}
	dead := self
	dead.PID = deadPID(t)
	if alive, known := ownerState(dead.String()); alive || !known {
		t.Errorf("dead owner %s: alive %v known %v", dead, alive, known)
	}
	reused := self
	reused.Start++ // same PID, another process
	if alive, _ := ownerState(reused.String()); alive {
		t.Errorf("a reused PID counts as the owner")
	}
	rebooted := self
	rebooted.BootID = "another-boot"
	if alive, known := ownerState(rebooted.String()); alive || !known {
		t.Errorf("owner of another boot: alive %v known %v", alive, known)
	}
	remote := self
	remote.Host = "elsewhere"
	if _, known := ownerState(remote.String()); known {
		t.Errorf("an owner on another host cannot be judged")
	}
	if _, known := ownerState("garbage"); known {
		t.Errorf("a malformed label cannot be judged")
	}
}
