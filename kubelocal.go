package chaosbench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/clusters/controlplane"
	"github.com/etcd-chaosbench/chaosbench/clusters/etcdbuild"
	"github.com/etcd-chaosbench/chaosbench/clusters/kubebuild"
	"github.com/etcd-chaosbench/chaosbench/clusters/kubenode"
	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// KubeLocalOptions are the settings of `chaosbench kube local up`.
type KubeLocalOptions struct {
	// Dir holds everything of the node (default DefaultKubeLocalDir()).
	Dir string
	// KubeVersion is the Kubernetes release of the control plane and the kubelet.
	KubeVersion string
	// Images are more local Docker images to import into the node (chaosbench's own is always imported).
	Images []string
	// Ready, when set, is called once the node is ready (tests use it); Up then waits for ctx to end.
	Ready func(*kubenode.Node)
}

// DefaultKubeLocalDir is where `kube local up` keeps its node unless told otherwise, and where
// `kube local down` looks for it.
func DefaultKubeLocalDir() string { return filepath.Join(os.TempDir(), "chaosbench-kube-local") }

// KubeLocalUp builds what is missing (the control plane, the kubelet, kubectl and CoreDNS of the release,
// chaosbench's image), starts a one-member etcd cluster for the control plane and a one-node Kubernetes
// on this machine (package kubenode), prints how to use it, and keeps it until ctx ends; then it removes
// every trace of it. A machine that cannot run a node is a usage error that says what it lacks.
func KubeLocalUp(ctx context.Context, opts KubeLocalOptions, env Env) (err error) {
	out := env.Out
	if out == nil {
		out = io.Discard
	}
	if opts.Dir == "" {
		opts.Dir = DefaultKubeLocalDir()
	}
	if opts.KubeVersion == "" {
		opts.KubeVersion = DefaultKubeVersion
	}
	r, err := kubebuild.Parse(opts.KubeVersion)
	if err != nil {
		return err
	}
	if err := kubenode.CheckHost(); err != nil {
		return outcome.Usagef("kube local up: %v", err)
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return outcome.Usagef("--dir %s: %v", opts.Dir, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "state.json")); err == nil {
		return outcome.Usagef("--dir %s holds a node already: chaosbench kube local down --dir %s removes it", dir, dir)
	}
	control, err := kubebuild.Build(ctx, r, kubebuild.Options{Log: out})
	if err != nil {
		return err
	}
	node, err := kubebuild.BuildNode(ctx, r, kubebuild.Options{Log: out})
	if err != nil {
		return err
	}
	img, err := clusters.ResolveImage(ctx, etcdbuild.Builtin, clusters.ImageOptions{})
	if err != nil {
		return err
	}
	d, err := clusters.DockerClient(ctx)
	if err != nil {
		return err
	}
	_, err = clusters.EnsureImage(ctx, d.Client, img, out)
	d.Close()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return outcome.Usagef("--dir %s: %v", dir, err)
	}
	// The control plane's own etcd, under the node's directory (Down kills and removes it too).
	etcd, err := clusters.StartEmbedded(ctx, clusters.EmbedOptions{Members: 1, Dir: filepath.Join(dir, "etcd"), Command: env.MemberCommand})
	if err != nil {
		return fmt.Errorf("kube local up: the control plane's etcd: %w", err)
	}
	cleanup := func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		etcd.Close(cctx)
	}
	n, err := kubenode.Start(ctx, kubenode.Options{
		Control: control, Node: node, Dir: dir, Etcd: controlplane.Etcd{Endpoints: etcd.Endpoints()},
		Images: append([]string{img.Ref}, opts.Images...), Log: out,
	})
	if err != nil {
		cleanup()
		os.RemoveAll(dir)
		var un *kubenode.Unavailable
		if errors.As(err, &un) {
			return outcome.Usagef("kube local up: %v", err)
		}
		return fmt.Errorf("kube local up: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		defer cancel()
		// Close removes the directory, and with it the control plane's etcd (killed: it holds nothing to keep).
		cerr := n.Close(cctx)
		etcd.Close(cctx)
		if cerr != nil {
			fmt.Fprintf(out, "kube local: %v\n", cerr)
			if err == nil {
				err = cerr
			}
		} else {
			fmt.Fprintf(out, "kube local: node removed (processes, mounts, bridge, cgroups, %s)\n", dir)
		}
	}()
	fmt.Fprintf(out, "kube local: node %s ready (interrupt to remove it)\n", n.Name())
	fmt.Fprintf(out, "  export KUBECONFIG=%s\n", n.Kubeconfig())
	fmt.Fprintf(out, "  kubectl: %s\n", node.Kubectl)
	fmt.Fprintf(out, "  image: %s (imported; pods run it as named, never pulled)\n", img.Ref)
	fmt.Fprintf(out, "  pods reach this machine at %s: serve etcd there, or on a docker network (chaosbench cluster --cluster docker)\n", n.Gateway())
	fmt.Fprintf(out, "  claims of up to 10Gi bind to the volumes %s-0..%d (%s)\n", kubenode.ResultsVolume, kubenode.Volumes-1, filepath.Dir(n.VolumeDir(kubenode.VolumeName(0))))
	if opts.Ready != nil {
		opts.Ready(n)
	}
	<-ctx.Done()
	return nil
}

// KubeLocalDown removes what a `kube local up` left in dir (a node whose process was killed): processes,
// mounts, its bridge, its cgroups and the directory.
func KubeLocalDown(dir string, out io.Writer) error {
	if dir == "" {
		dir = DefaultKubeLocalDir()
	}
	if _, err := os.Stat(filepath.Join(dir, "state.json")); err != nil {
		return outcome.Usagef("kube local down: no node in %s (nothing to remove)", dir)
	}
	if err := kubenode.Down(dir); err != nil {
		return err
	}
	fmt.Fprintf(out, "kube local: node in %s removed\n", strings.TrimSuffix(dir, "/"))
	return nil
}
