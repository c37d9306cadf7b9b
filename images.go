package chaosbench

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/clusters/kubebuild"
	"github.com/etcd-chaosbench/chaosbench/results/live"
)

// DefaultKubeVersion is the Kubernetes release `chaosbench image kube` builds when none is given: the one
// chaosbench's client-go matches, so that its clients and the apiservers it builds are of one release. It
// is here so that the CLI can show it without knowing how Kubernetes is built.
const DefaultKubeVersion = kubebuild.DefaultVersion

// ImagesOptions configures BuildImages: what `chaosbench image build` is asked for.
type ImagesOptions struct {
	// Versions are the etcd releases to build, as --etcd-version takes them: comma-separated, "builtin" for
	// the etcd linked into chaosbench.
	Versions string
	// BinaryOnly builds the etcd binaries only, which needs no Docker (enough for embedded clusters).
	BinaryOnly bool
	// Failpoints builds the releases with gofail failpoints, as run --failpoints uses them, and lists each
	// one's failpoints, the names failpoint:TARGET=NAME:ACTION takes.
	Failpoints bool
	// Out receives the builds' progress and then one line per built release (label, image, binary); nil
	// discards them.
	Out io.Writer
}

// BuildImages builds the etcd binaries (cached ones are reused) and, unless BinaryOnly, the images that
// docker clusters and --etcd-version use, and lists what it built on opts.Out, also when a later release
// fails, so that what is ready is known. Building ahead of a run keeps the run's own start quick.
func BuildImages(ctx context.Context, opts ImagesOptions) ([]clusters.EtcdImage, error) {
	out := opts.Out
	if out == nil {
		out = io.Discard
	}
	// A cold build takes minutes: on a terminal a spinner says which build is running and for how long.
	console := live.NewConsole(out)
	stop := live.StartActivity(live.ActivityOptions{Out: out, Console: console, Label: "image build"})
	images, err := clusters.BuildImages(ctx, SplitVersions(opts.Versions), opts.BinaryOnly,
		clusters.ImageOptions{Log: console, Failpoints: opts.Failpoints})
	stop()
	for _, img := range images {
		if opts.BinaryOnly {
			fmt.Fprintf(out, "%s\t%s\n", img.Label(), img.Binary)
		} else {
			fmt.Fprintf(out, "%s\t%s\t%s\n", img.Label(), img.Ref, img.Binary)
		}
		if img.Failpoints != nil {
			// The names failpoint:TARGET=NAME:ACTION takes with this release.
			fmt.Fprintf(out, "  %d failpoints: %s\n", len(img.Failpoints), strings.Join(img.Failpoints, " "))
		}
	}
	return images, err
}

// ListImages writes a table of chaosbench's local images to out, newest first, so that a user sees what
// docker clusters will start from and what `chaosbench clean --images` would remove.
func ListImages(ctx context.Context, out io.Writer) error {
	images, err := clusters.ListImages(ctx)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "IMAGE\tETCD\tKIND\tSIZE\tCREATED")
	for _, im := range images {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d MiB\t%s\n", im.Ref, im.Version, im.Kind, im.Size>>20, im.Created.Format("2006-01-02 15:04"))
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write the image list: %w", err)
	}
	return nil
}

// BuildKube builds a Kubernetes control plane (kube-apiserver, kube-controller-manager, kube-scheduler)
// and KWOK of release version (e.g. v1.34.4) from the Go module proxy into the build cache, for
// --workload controlplane and chaosbench fidelity, which then start at once, and the kubelet, kubectl
// and CoreDNS of `chaosbench kube local up`. log receives the builds'
// progress (a cold build takes minutes) and then the path of each program. A version chaosbench cannot
// build is a usage error.
func BuildKube(ctx context.Context, version string, log io.Writer) error {
	if log == nil {
		log = io.Discard
	}
	r, err := kubebuild.Parse(version)
	if err != nil {
		return err
	}
	console := live.NewConsole(log)
	stop := live.StartActivity(live.ActivityOptions{Out: log, Console: console, Label: "kube build"})
	b, err := kubebuild.Build(ctx, r, kubebuild.Options{Log: console})
	var node kubebuild.NodeBinaries
	if err == nil {
		node, err = kubebuild.BuildNode(ctx, r, kubebuild.Options{Log: console})
	}
	stop()
	if err != nil {
		return err
	}
	for _, p := range []string{b.APIServer, b.ControllerManager, b.Scheduler, b.KWOK, node.Kubelet, node.Kubectl, node.CoreDNS} {
		fmt.Fprintln(log, p)
	}
	return nil
}
