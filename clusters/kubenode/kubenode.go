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
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
