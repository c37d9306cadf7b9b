// Package kubenode runs a one-node Kubernetes on this machine, for tests and for trying chaosbench's
// Kubernetes path without a cluster: the control plane of package controlplane (kube-apiserver,
// kube-controller-manager, kube-scheduler), a real kubelet built from the same release, containerd and
// runc from the distribution with the reference CNI plugins (a bridge of its own), and CoreDNS on the
// bridge's address for the cluster's names (headless Services). No image can be pulled on a machine
// without a registry: the images pods run (chaosbench's own, and a pause image made of it) are imported
// from the local Docker engine into the node's containerd.
//
// Everything the node creates lives under its directory or is named after it, and is recorded there
// (state.json), so that Close, or Down after a node whose process was killed, removes all of it: the
// processes (containerd, its shims, the containers, the kubelet, CoreDNS, the control plane), the mounts
// under the directory (pods' volumes, network namespaces, container root filesystems), the bridge, the
// cgroups and the directory itself.
package kubenode

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/clusters/controlplane"
	"github.com/etcd-chaosbench/chaosbench/clusters/kubebuild"
)

// Options configures Start.
type Options struct {
	// Control is the control plane's build (kubebuild.Build); Node the kubelet's and CoreDNS's
	// (kubebuild.BuildNode), of the same release.
	Control kubebuild.Binaries
	Node    kubebuild.NodeBinaries
	// Dir holds everything of the node (it is created, and removed by Close).
	Dir string
	// Etcd is the control plane's storage.
	Etcd controlplane.Etcd
	// Images are local Docker images to import into the node's containerd (pods run them as they are
	// named, never pulled). The first one must hold /chaosbench: the pods' sandboxes run it as their
	// pause process (PauseCommand).
	Images []string
	// Name is the node's name (default chaosbench-node).
	Name string
	// ReadyTimeout bounds the wait for the node to be Ready (default 3 minutes).
	ReadyTimeout time.Duration
	// Log receives a line per step; nil discards them.
	Log io.Writer
}

// state is what a node records in its directory, for Down: the host objects named after it.
type state struct {
	Name   string `json:"name"`
	Bridge string `json:"bridge"`
	// Network is the CNI network's name: libcni caches each attachment's result under
	// /var/lib/cni/results/<network>-<container>-<interface>, outside the node's directory.
	Network    string `json:"network"`
	Subnet     string `json:"subnet"`
	CgroupRoot string `json:"cgroupRoot"`
	// DockerUser says the node added its rules to Docker's DOCKER-USER chain.
	DockerUser bool `json:"dockerUser"`
	// Sysctls are the kernel settings the kubelet changes (it sets what it expects of a node's kernel),
	// as they were: Down puts them back.
	Sysctls map[string]string `json:"sysctls"`
}

// kubeletSysctls are the kernel settings the kubelet sets on start (setupKernelTunables).
var kubeletSysctls = []string{"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes"}

// Node is a running one-node Kubernetes.
type Node struct {
	opts    Options
	st      state
	gateway netip.Addr
	cp      *controlplane.ControlPlane
	spawner *clusters.Spawner
	procs   []*proc // containerd, coredns, kubelet: in start order
	// kubeconfig is an administrator's kubeconfig (client certificate of the control plane's CA).
	kubeconfig string
	closeOnce  sync.Once
	closeErr   error
}

type proc struct {
	name string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// Kubeconfig returns the path of a kubeconfig that administers the node's cluster (for kubectl too).
func (n *Node) Kubeconfig() string { return n.opts.Dir + "/kubeconfig" }

// Gateway returns the bridge's address on the host: what pods reach the host by (and the cluster DNS).
func (n *Node) Gateway() netip.Addr { return n.gateway }

// Name returns the node's name.
func (n *Node) Name() string { return n.st.Name }

// VolumeDir returns the host directory behind one of the node's PersistentVolumes (VolumeName).
func (n *Node) VolumeDir(volume string) string { return VolumeDir(n.opts.Dir, volume) }

// VolumeDir returns the host directory behind a PersistentVolume of the node in dir.
func VolumeDir(dir, volume string) string { return filepath.Join(dir, "volumes", volume) }

// VolumeName is the name of the node's i-th PersistentVolume.
func VolumeName(i int) string { return fmt.Sprintf("%s-%d", ResultsVolume, i) }

// ControlPlane returns the node's control plane.
func (n *Node) ControlPlane() *controlplane.ControlPlane { return n.cp }

// cniCacheDir is where libcni (in containerd's CRI) caches what each attachment returned.
const cniCacheDir = "/var/lib/cni"

// ResultsVolume prefixes the PersistentVolumes a node provides (VolumeName: ReadWriteMany, 10Gi, no
// storage class, each a directory of the host): the claim of each `chaosbench kube render` binds to one.
const ResultsVolume = "chaosbench-local-results"

// Volumes is how many PersistentVolumes a node provides: a volume stays bound to its claim, so each run
// rendered under another name takes another one.
const Volumes = 4

// PauseImage is the sandbox image a node configures, built from its first image.
const PauseImage = "chaosbench/pause:local"

// Start brings a node up and returns once it is Ready and CoreDNS answers. On failure everything started
// is removed again (Close). A machine that cannot run a node at all is an *Unavailable error.
func Start(ctx context.Context, opts Options) (_ *Node, err error) {
	if err := CheckHost(); err != nil {
		return nil, err
	}
	if len(opts.Images) == 0 {
		return nil, errors.New("start node: no image to import (the first one runs the sandboxes)")
	}
	if opts.Name == "" {
		opts.Name = "chaosbench-node"
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = 3 * time.Minute
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("start node: %w", err)
	}
	opts.Dir = dir
	if _, err := os.Stat(filepath.Join(dir, "state.json")); err == nil {
		return nil, fmt.Errorf("start node: %s holds a node already (chaosbench kube local down --dir %s removes it)", dir, dir)
	}
	id := randomID()
	n := &Node{opts: opts, spawner: clusters.NewSpawner()}
	n.st = state{Name: opts.Name, Bridge: "cbnode" + id[:6], Network: "chaosbench-node-" + id, CgroupRoot: "/chaosbench-node-" + id}
	subnet, err := freeSubnet(id)
	if err != nil {
		return nil, err
	}
	n.st.Subnet = subnet.String()
	n.st.Sysctls = map[string]string{}
	for _, k := range kubeletSysctls {
		if v, err := os.ReadFile("/proc/sys/" + k); err == nil {
			n.st.Sysctls[k] = strings.TrimSpace(string(v))
		}
	}
	n.gateway = subnet.Addr().Next()
	for _, d := range []string{"containerd/root", "containerd/state", "cni/conf", "cni/data", "kubelet", "pod-logs", "coredns", "volumes"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return nil, fmt.Errorf("start node: %w", err)
		}
	}
	if err := writeJSON(filepath.Join(dir, "state.json"), n.st); err != nil {
		return nil, fmt.Errorf("start node: %w", err)
	}
	defer func() {
		if err != nil {
			n.Close(context.WithoutCancel(ctx))
		}
	}()
	began := time.Now()
	if err := n.network(); err != nil {
		return nil, err
	}
	if err := makeCgroupRoot(n.st.CgroupRoot); err != nil {
		return nil, fmt.Errorf("start node: %w", err)
	}
	if err := n.startContainerd(ctx); err != nil {
		return nil, err
	}
	if err := n.importImages(ctx); err != nil {
		return nil, err
	}
	// The apiserver reaches the kubelet (logs, exec) at the node's address with the control plane's client
	// certificate (controlplane writes its certificates into <Dir>/tls), which the kubelet checks.
	cpDir := filepath.Join(dir, "controlplane")
	cp, err := controlplane.Start(ctx, controlplane.Options{
		Binaries: opts.Control, Dir: cpDir, Etcd: opts.Etcd, Apiservers: 1, Log: opts.Log,
		APIServerArgs: []string{
			"--kubelet-client-certificate=" + filepath.Join(cpDir, "tls", "client.pem"),
			"--kubelet-client-key=" + filepath.Join(cpDir, "tls", "client-key.pem"),
			"--kubelet-preferred-address-types=InternalIP",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("start node: %w", err)
	}
	n.cp = cp
	if err := n.writeKubeconfig(n.Kubeconfig()); err != nil {
		return nil, err
	}
	if err := n.startCoreDNS(ctx); err != nil {
		return nil, err
	}
	if err := n.startKubelet(); err != nil {
		return nil, err
	}
	if err := n.waitReady(ctx); err != nil {
		return nil, err
	}
	if err := n.createVolumes(ctx); err != nil {
		return nil, err
	}
	fmt.Fprintf(opts.Log, "node %s ready in %.0fs: pods on %s (bridge %s), cluster DNS %s, kubeconfig %s\n",
		n.st.Name, time.Since(began).Seconds(), n.st.Subnet, n.st.Bridge, n.gateway, n.Kubeconfig())
	return n, nil
}

func randomID() string {
	b := make([]byte, 4)
	rand.Read(b)
	return hex.EncodeToString(b)
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// freeSubnet picks a /24 in 10.244.0.0/16 that no interface of this machine is on.
func freeSubnet(id string) (netip.Prefix, error) {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("start node: list addresses: %w", err)
	}
	seed, _ := strconv.ParseUint(id[:2], 16, 8)
	for i := range 250 {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, byte((int(seed)+i)%250 + 1), 0}), 24)
		free := true
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok {
				if ap, ok := netip.AddrFromSlice(ipn.IP); ok && p.Contains(ap.Unmap()) {
					free = false
				}
			}
		}
		if free {
			return p, nil
		}
	}
	return netip.Prefix{}, errors.New("start node: no free /24 in 10.244.0.0/16 for the pods")
}

// network creates the node's bridge with the gateway address (the CNI bridge plugin adopts it), so that
// CoreDNS can listen on it before the first pod, and writes the CNI configuration.
func (n *Node) network() error {
	gw := n.gateway.String()
	for _, args := range [][]string{
		{"link", "add", "name", n.st.Bridge, "type", "bridge"},
		{"addr", "add", gw + "/24", "dev", n.st.Bridge},
		{"link", "set", n.st.Bridge, "up"},
	} {
		if err := ip(args...); err != nil {
			return fmt.Errorf("start node: %w", err)
		}
	}
	// Docker drops forwarded traffic by default (FORWARD policy DROP): its DOCKER-USER chain is where the
	// pods' bridge is let through to the members of a docker cluster and back. Down deletes the rules.
	if dockerUserChain() {
		for _, rule := range dockerUserRules(n.st.Bridge) {
			if err := iptables(append([]string{"-I", "DOCKER-USER"}, rule...)...); err != nil {
				return fmt.Errorf("start node: %w", err)
			}
		}
		n.st.DockerUser = true
		if err := writeJSON(filepath.Join(n.opts.Dir, "state.json"), n.st); err != nil {
			return fmt.Errorf("start node: %w", err)
		}
	}
	conf := map[string]any{
		"cniVersion": "0.4.0", "name": n.st.Network,
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": n.st.Bridge, "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{
					"type": "host-local", "dataDir": filepath.Join(n.opts.Dir, "cni", "data"),
					"ranges": [][]map[string]string{{{"subnet": n.st.Subnet, "gateway": gw}}},
					"routes": []map[string]string{{"dst": "0.0.0.0/0"}},
				},
			},
			map[string]any{"type": "loopback"},
		},
	}
	if err := writeJSON(filepath.Join(n.opts.Dir, "cni", "conf", "10-chaosbench.conflist"), conf); err != nil {
		return fmt.Errorf("start node: %w", err)
	}
	return nil
}

func (n *Node) containerdSocket() string {
	return filepath.Join(n.opts.Dir, "containerd", "containerd.sock")
}

// startContainerd starts a containerd of the node's own (root, state and socket under its directory, so
// that it never meets Docker's), with the CRI plugin on the node's CNI configuration and pause image.
// restrict_oom_score_adj keeps the containers' OOM score adjustments at or above containerd's own: the
// kubelet asks -998 for every sandbox, and a root without CAP_SYS_RESOURCE (these machines' root) may
// not lower one, which runc reports as "can't get final child's PID from pipe: EOF".
func (n *Node) startContainerd(ctx context.Context) error {
	d := filepath.Join(n.opts.Dir, "containerd")
	conf := fmt.Sprintf(`version = 2
root = %q
state = %q
[grpc]
  address = %q
[ttrpc]
  address = %q
[debug]
  address = ""
[metrics]
  address = ""
[plugins."io.containerd.internal.v1.opt"]
  path = %q
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  enable_selinux = false
  disable_apparmor = true
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
`, filepath.Join(d, "root"), filepath.Join(d, "state"), n.containerdSocket(), n.containerdSocket()+".ttrpc",
		filepath.Join(d, "opt"), "docker.io/"+PauseImage, CNIDir, filepath.Join(n.opts.Dir, "cni", "conf"))
	path := filepath.Join(d, "containerd.toml")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return fmt.Errorf("start node: %w", err)
	}
	if _, err := n.start("containerd", "containerd", "--config", path); err != nil {
		return err
	}
	return n.waitFor(ctx, "containerd", 30*time.Second, func() error {
		_, err := n.ctr(ctx, "version")
		return err
	})
}

// ctr runs containerd's ctr against the node's containerd, in the CRI's namespace.
func (n *Node) ctr(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "ctr", append([]string{"--address", n.containerdSocket(), "--namespace", "k8s.io"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ctr %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// start starts one of the node's processes, its output in <Dir>/<name>.log.
func (n *Node) start(name, bin string, args ...string) (*proc, error) {
	log, err := os.OpenFile(filepath.Join(n.opts.Dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := n.spawner.Start(cmd); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		log.Close()
		close(p.done)
	}()
	n.procs = append(n.procs, p)
	fmt.Fprintf(n.opts.Log, "node: started %s (pid %d)\n", name, cmd.Process.Pid)
	return p, nil
}

// waitFor polls check until it succeeds, failing at once when the named process has exited (with its
// log's last line) or after timeout.
func (n *Node) waitFor(ctx context.Context, name string, timeout time.Duration, check func() error) error {
	var p *proc
	for _, q := range n.procs {
		if q.name == name {
			p = q
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return nil
		}
		if p != nil {
			select {
			case <-p.done:
				return fmt.Errorf("start node: %s exited (%v): %s", name, p.err, LastLogLine(filepath.Join(n.opts.Dir, name+".log")))
			default:
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("start node: %s not ready within %s: %v; its last log line: %s", name, timeout, err, LastLogLine(filepath.Join(n.opts.Dir, name+".log")))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("start node: wait for %s: %w", name, ctx.Err())
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// LastLogLine returns the last non-empty line of a log, shortened: why a process stopped.
func LastLogLine(path string) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return "no log"
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	l := strings.TrimSpace(lines[len(lines)-1])
	if len(l) > 400 {
		l = l[:400] + "..."
	}
	return l
}

// writeKubeconfig writes a kubeconfig with the control plane's client certificate.
func (n *Node) writeKubeconfig(path string) error {
	tlsFiles := n.cp.ClientTLS()
	content := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: chaosbench-local
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: chaosbench-local
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: chaosbench-local
  context:
    cluster: chaosbench-local
    user: chaosbench-local
    namespace: default
current-context: chaosbench-local
`, n.cp.APIServerURLs()[0], tlsFiles.CA, tlsFiles.Cert, tlsFiles.Key)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return fmt.Errorf("start node: write kubeconfig: %w", err)
	}
	return nil
}

// startCoreDNS serves the cluster's names (cluster.local: Services, and pods by hostname under a
// headless Service) on the bridge's address, where the kubelet points every pod's resolver.
func (n *Node) startCoreDNS(ctx context.Context) error {
	readyPort, err := freePort()
	if err != nil {
		return fmt.Errorf("start node: %w", err)
	}
	corefile := fmt.Sprintf(`.:53 {
    bind %s
    errors
    ready 127.0.0.1:%d
    kubernetes cluster.local {
        kubeconfig %s chaosbench-local
        pods insecure
        ttl 5
    }
}
`, n.gateway, readyPort, n.Kubeconfig())
	path := filepath.Join(n.opts.Dir, "coredns", "Corefile")
	if err := os.WriteFile(path, []byte(corefile), 0o644); err != nil {
		return fmt.Errorf("start node: %w", err)
	}
	if _, err := n.start("coredns", n.opts.Node.CoreDNS, "-conf", path); err != nil {
		return err
	}
	hc := &http.Client{Timeout: 2 * time.Second}
	return n.waitFor(ctx, "coredns", time.Minute, func() error {
		resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/ready", readyPort))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("/ready answered %d", resp.StatusCode)
		}
		return nil
	})
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startKubelet starts the kubelet on the node's containerd, cgroup root and directories. The settings
// that make it run on an ordinary machine: the cgroupfs driver (no systemd), cgroup v1 allowed
// (failCgroupV1: false, the kubelet's default refuses it since 1.35), no swap check, eviction only at
// the last percent of disk, everything under the node's directory.
func (n *Node) startKubelet() error {
	mounts, err := cgroupMounts()
	if err != nil {
		return fmt.Errorf("start node: %w", err)
	}
	port, err := freePort()
	if err != nil {
		return fmt.Errorf("start node: %w", err)
	}
	d := filepath.Join(n.opts.Dir, "kubelet")
	conf := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: false
  x509:
    clientCAFile: %s
authorization:
  mode: AlwaysAllow
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
cgroupRoot: %s
failCgroupV1: %t
failSwapOn: false
clusterDomain: cluster.local
clusterDNS: [%s]
resolvConf: ""
podLogsDir: %s
volumePluginDir: %s
registerNode: true
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%%
  nodefs.inodesFree: 1%%
  imagefs.available: 1%%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
imageMinimumGCAge: 24h
maxPods: 20
serializeImagePulls: false
`, n.gateway, port, n.cp.ClientTLS().CA, n.containerdSocket(), n.st.CgroupRoot, len(mounts) == 1 && mounts[0].v2, n.gateway, filepath.Join(n.opts.Dir, "pod-logs"),
		filepath.Join(d, "volume-plugins"))
	path := filepath.Join(n.opts.Dir, "kubelet.yaml")
	if err := os.WriteFile(path, []byte(conf), 0o644); err != nil {
		return fmt.Errorf("start node: %w", err)
	}
	_, err = n.start("kubelet", n.opts.Node.Kubelet, "--config="+path, "--kubeconfig="+n.Kubeconfig(),
		"--root-dir="+d, "--cert-dir="+filepath.Join(d, "pki"), "--hostname-override="+n.st.Name, "--node-ip="+n.gateway.String(), "--v=1")
	return err
}

// waitReady waits until the node reports Ready.
func (n *Node) waitReady(ctx context.Context) error {
	hc, err := n.cp.HTTPClient()
	if err != nil {
		return fmt.Errorf("start node: %w", err)
	}
	url := n.cp.APIServerURLs()[0] + "/api/v1/nodes/" + n.st.Name
	return n.waitFor(ctx, "kubelet", n.opts.ReadyTimeout, func() error {
		resp, err := hc.Get(url)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var node struct {
			Status struct {
				Conditions []struct{ Type, Status, Reason, Message string }
			}
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("node %s: %s", n.st.Name, resp.Status)
		}
		if err := json.NewDecoder(resp.Body).Decode(&node); err != nil {
			return err
		}
		for _, c := range node.Status.Conditions {
			if c.Type == "Ready" {
				if c.Status == "True" {
					return nil
				}
				return fmt.Errorf("node %s not ready: %s: %s", n.st.Name, c.Reason, c.Message)
			}
		}
		return fmt.Errorf("node %s has no Ready condition yet", n.st.Name)
	})
}

// createVolumes creates the node's PersistentVolumes: directories of the host, writable by the pods'
// non-root user, each bound by a claim of up to 10Gi without a storage class.
func (n *Node) createVolumes(ctx context.Context) error {
	hc, err := n.cp.HTTPClient()
	if err != nil {
		return fmt.Errorf("start node: %w", err)
	}
	for i := range Volumes {
		name := VolumeName(i)
		dir := n.VolumeDir(name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("start node: %w", err)
		}
		if err := os.Chmod(dir, 0o777); err != nil {
			return fmt.Errorf("start node: %w", err)
		}
		pv := map[string]any{
			"apiVersion": "v1", "kind": "PersistentVolume",
			"metadata": map[string]any{"name": name},
			"spec": map[string]any{
				"capacity":                      map[string]string{"storage": "10Gi"},
				"accessModes":                   []string{"ReadWriteOnce", "ReadWriteMany"},
				"persistentVolumeReclaimPolicy": "Retain",
				"storageClassName":              "",
				"hostPath":                      map[string]string{"path": dir, "type": "Directory"},
			},
		}
		body, _ := json.Marshal(pv)
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, n.cp.APIServerURLs()[0]+"/api/v1/persistentvolumes", strings.NewReader(string(body)))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			return fmt.Errorf("start node: create volume %s: %w", name, err)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
		resp.Body.Close()
		if resp.StatusCode != http.StatusCreated {
			return fmt.Errorf("start node: create volume %s: %s: %s", name, resp.Status, b)
		}
	}
	return nil
}

// Close removes the node (see Down) after stopping its processes: the kubelet first, so that it starts
// nothing more, then the pods' processes, containerd and CoreDNS, then the control plane. It is safe to
// call more than once; the error says what could not be removed.
func (n *Node) Close(ctx context.Context) error {
	n.closeOnce.Do(func() {
		var errs []error
		// Newest first: the kubelet, CoreDNS, containerd.
		for i := len(n.procs) - 1; i >= 0; i-- {
			p := n.procs[i]
			if p.name == "containerd" {
				// The containers go before their runtime, so that its shims end cleanly.
				errs = append(errs, n.stopContainers(ctx))
			}
			stopProc(p)
		}
		if n.cp != nil {
			n.cp.Close(ctx)
		}
		n.spawner.Close()
		errs = append(errs, Down(n.opts.Dir))
		n.closeErr = errors.Join(errs...)
	})
	return n.closeErr
}

// stopProc stops one process: SIGTERM, SIGKILL after ten seconds.
func stopProc(p *proc) {
	syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// stopContainers kills every process of the node's pods and deletes their tasks, so that containerd's
// shims exit on their own and remove their sockets.
func (n *Node) stopContainers(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	killCgroup(n.st.CgroupRoot)
	out, err := n.ctr(ctx, "tasks", "ls", "-q")
	if err != nil {
		return fmt.Errorf("stop the node's containers: %w", err)
	}
	var errs []error
	for _, id := range strings.Fields(out) {
		if _, err := n.ctr(ctx, "tasks", "delete", "--force", id); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// killCgroup SIGKILLs every process in the cgroup tree root (in any hierarchy) and returns how many it
// found.
func killCgroup(root string) int {
	mounts, err := cgroupMounts()
	if err != nil {
		return 0
	}
	killed := 0
	for _, m := range mounts {
		filepath.WalkDir(filepath.Join(m.dir, root), func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			data, _ := os.ReadFile(p)
			for _, f := range strings.Fields(string(data)) {
				if pid, err := strconv.Atoi(f); err == nil && pid > 0 {
					if syscall.Kill(pid, syscall.SIGKILL) == nil {
						killed++
					}
				}
			}
			return nil
		})
	}
	return killed
}

// Down removes what a node left in dir and on the host: it kills the processes that name dir (the
// node's containerd, its shims, the kubelet, CoreDNS) and the processes of its cgroups, unmounts
// everything under dir, puts back the kernel settings the kubelet changed, deletes its bridge and
// cgroups, and removes dir. A directory without a node
// (no state.json) is an error; Down of a node already gone removes what is left of it.
func Down(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return fmt.Errorf("%s holds no local node: %w", dir, err)
	}
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("%s/state.json: %w", dir, err)
	}
	var errs []error
	// Processes: those of the node's cgroups (containers), and those naming its directory (containerd,
	// shims, kubelet, CoreDNS, the control plane), until none is left.
	for attempt := 0; ; attempt++ {
		pids := processesUnder(dir)
		n := killCgroup(st.CgroupRoot)
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		if len(pids)+n == 0 {
			break
		}
		if attempt == 50 {
			errs = append(errs, fmt.Errorf("processes still running: %v", pids))
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := unmountUnder(dir); err != nil {
		errs = append(errs, err)
	}
	if st.Network != "" {
		// libcni's cache of the pods' attachments (a sandbox removed by the kubelet takes its own along).
		cached, _ := filepath.Glob(filepath.Join(cniCacheDir, "results", st.Network+"-*"))
		for _, f := range cached {
			// <network>-<sandbox>-eth0, and the loopback plugin's cni-loopback-<sandbox>-lo beside it.
			id := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), st.Network+"-"), "-eth0")
			os.Remove(filepath.Join(cniCacheDir, "results", "cni-loopback-"+id+"-lo"))
			if err := os.Remove(f); err != nil {
				errs = append(errs, err)
			}
		}
		// And its directories, when nothing else uses them (Remove fails on a directory that is not empty).
		os.Remove(filepath.Join(cniCacheDir, "results"))
		os.Remove(cniCacheDir)
	}
	for k, v := range st.Sysctls {
		if cur, err := os.ReadFile("/proc/sys/" + k); err == nil && strings.TrimSpace(string(cur)) != v {
			if err := os.WriteFile("/proc/sys/"+k, []byte(v), 0o644); err != nil {
				errs = append(errs, fmt.Errorf("restore %s=%s: %w", k, v, err))
			}
		}
	}
	if st.DockerUser {
		for _, rule := range dockerUserRules(st.Bridge) {
			for iptables(append([]string{"-C", "DOCKER-USER"}, rule...)...) == nil {
				if err := iptables(append([]string{"-D", "DOCKER-USER"}, rule...)...); err != nil {
					errs = append(errs, err)
					break
				}
			}
		}
	}
	if st.Bridge != "" && linkExists(st.Bridge) {
		if err := ip("link", "delete", st.Bridge); err != nil {
			errs = append(errs, err)
		}
	}
	if st.CgroupRoot != "" {
		// A killed process leaves its cgroup a moment later.
		var err error
		for range 50 {
			if err = removeCgroupRoot(st.CgroupRoot); err == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) == 0 {
		if err := os.RemoveAll(dir); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("remove the local node in %s: %w", dir, errors.Join(errs...))
	}
	return nil
}

// Leftovers lists what of a node in dir is still on the host: processes naming dir, mounts under it,
// its bridge, its cgroups, kernel settings not put back, dir itself. Empty after Down; tests check it.
func Leftovers(dir string, st Snapshot) []string {
	var out []string
	if pids := processesUnder(dir); len(pids) > 0 {
		out = append(out, fmt.Sprintf("processes %v", pids))
	}
	if m, _ := mountsUnder(dir); len(m) > 0 {
		out = append(out, "mounts "+strings.Join(m, ", "))
	}
	if st.Bridge != "" && linkExists(st.Bridge) {
		out = append(out, "bridge "+st.Bridge)
	}
	if st.Bridge != "" && dockerUserChain() {
		for _, rule := range dockerUserRules(st.Bridge) {
			if iptables(append([]string{"-C", "DOCKER-USER"}, rule...)...) == nil {
				out = append(out, "iptables DOCKER-USER "+strings.Join(rule, " "))
			}
		}
	}
	if st.Network != "" {
		if cached, _ := filepath.Glob(filepath.Join(cniCacheDir, "results", st.Network+"-*")); len(cached) > 0 {
			out = append(out, "CNI cache "+strings.Join(cached, ", "))
		}
	}
	if mounts, err := cgroupMounts(); err == nil && st.CgroupRoot != "" {
		for _, m := range mounts {
			if _, err := os.Stat(filepath.Join(m.dir, st.CgroupRoot)); err == nil {
				out = append(out, "cgroup "+filepath.Join(m.dir, st.CgroupRoot))
			}
		}
	}
	for k, v := range st.Sysctls {
		if cur, err := os.ReadFile("/proc/sys/" + k); err == nil && strings.TrimSpace(string(cur)) != v {
			out = append(out, fmt.Sprintf("sysctl %s=%s (was %s)", k, strings.TrimSpace(string(cur)), v))
		}
	}
	if _, err := os.Stat(dir); err == nil {
		out = append(out, "directory "+dir)
	}
	return out
}

// Snapshot names a node's host objects (read from its directory before it goes).
type Snapshot struct {
	Bridge, Network, CgroupRoot string
	Sysctls                     map[string]string
}

// ReadSnapshot reads the names of a node's host objects from its directory.
func ReadSnapshot(dir string) (Snapshot, error) {
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return Snapshot{}, err
	}
	var st state
	if err := json.Unmarshal(data, &st); err != nil {
		return Snapshot{}, err
	}
	return Snapshot{Bridge: st.Bridge, Network: st.Network, CgroupRoot: st.CgroupRoot, Sysctls: st.Sysctls}, nil
}
