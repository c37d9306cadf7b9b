package kubenode

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
)

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
