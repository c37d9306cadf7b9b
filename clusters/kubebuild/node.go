package kubebuild

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// NodeBinaries are the paths of a built node: the kubelet and kubectl of a release, and CoreDNS.
type NodeBinaries struct {
	Kubelet, Kubectl, CoreDNS string
}

func nodePaths(dir string, r Release) NodeBinaries {
	return NodeBinaries{
		Kubelet: filepath.Join(dir, r.Version, Kubelet),
		Kubectl: filepath.Join(dir, r.Version, Kubectl),
		CoreDNS: filepath.Join(dir, "coredns-"+CoreDNSVersion, CoreDNS),
	}
}

// CachedNode returns r's node binaries when every one of them is already built.
func CachedNode(r Release, opts Options) (NodeBinaries, bool) {
	dir, err := cacheDir(opts)
	if err != nil {
		return NodeBinaries{}, false
	}
	b := nodePaths(dir, r)
	if exists(b.Kubelet) && exists(b.Kubectl) && exists(b.CoreDNS) {
		return b, true
	}
	return NodeBinaries{}, false
}

// BuildNode returns r's kubelet and kubectl and CoreDNS, building what is not cached yet (the kubelet
// and kubectl as the control plane is built, from a wrapper module of the release; CoreDNS from a wrapper
// of its own with only the plugins a node uses).
func BuildNode(ctx context.Context, r Release, opts Options) (NodeBinaries, error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if b, ok := CachedNode(r, opts); ok {
		return b, nil
	}
	dir, err := cacheDir(opts)
	if err != nil {
		return NodeBinaries{}, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "locks"), 0o755); err != nil {
		return NodeBinaries{}, fmt.Errorf("build the kubelet %s: %w", r.Version, err)
	}
	b := nodePaths(dir, r)
	if !exists(b.Kubelet) || !exists(b.Kubectl) {
		if err := locked(ctx, filepath.Join(dir, "locks", r.Version+"-node.lock"), func() error {
			if exists(b.Kubelet) && exists(b.Kubectl) {
				return nil
			}
			began := time.Now()
			fmt.Fprintf(opts.Log, "building the kubelet and kubectl %s from the Go module proxy (about 4 minutes, once)\n", r.Version)
			if err := buildNodePrograms(ctx, r, filepath.Dir(b.Kubelet)); err != nil {
				return err
			}
			fmt.Fprintf(opts.Log, "built the kubelet and kubectl %s in %.0fs\n", r.Version, time.Since(began).Seconds())
			return nil
		}); err != nil {
			return NodeBinaries{}, err
		}
	}
	if !exists(b.CoreDNS) {
		if err := locked(ctx, filepath.Join(dir, "locks", "coredns-"+CoreDNSVersion+".lock"), func() error {
			if exists(b.CoreDNS) {
				return nil
			}
			began := time.Now()
			fmt.Fprintf(opts.Log, "building CoreDNS %s from the Go module proxy (about 3 minutes, once)\n", CoreDNSVersion)
			if err := buildCoreDNS(ctx, b.CoreDNS); err != nil {
				return err
			}
			fmt.Fprintf(opts.Log, "built CoreDNS %s in %.0fs\n", CoreDNSVersion, time.Since(began).Seconds())
			return nil
		}); err != nil {
			return NodeBinaries{}, err
		}
	}
	return b, nil
}

// buildNodePrograms builds the kubelet and kubectl of r into dir.
func buildNodePrograms(ctx context.Context, r Release, dir string) error {
	work, err := os.MkdirTemp("", "chaosbench-kubelet-build-")
	if err != nil {
		return fmt.Errorf("build the kubelet %s: %w", r.Version, err)
	}
	defer os.RemoveAll(work)
	gomod, err := releaseGoMod(ctx, r, work)
	if err != nil {
		return err
	}
	staging := StagingModules(gomod)
	if len(staging) == 0 {
		return fmt.Errorf("build the kubelet %s: its go.mod replaces no staging modules", r.Version)
	}
	main := "// Built by chaosbench: the kubelet and kubectl of Kubernetes " + r.Version + ".\npackage main\n\nimport (\n" +
		"\t_ \"k8s.io/kubernetes/cmd/kubelet/app\"\n\t_ \"k8s.io/kubectl/pkg/cmd\"\n)\n\nfunc main() {}\n"
	for name, content := range map[string]string{"go.mod": WrapperGoMod(r, staging), "main.go": main} {
		if err := os.WriteFile(filepath.Join(work, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("build the kubelet %s: %w", r.Version, err)
		}
	}
	if out, err := goRun(ctx, work, "mod", "tidy"); err != nil {
		return fmt.Errorf("build the kubelet %s: go mod tidy: %w\n%s", r.Version, err, tail(out, 20))
	}
	tmp := filepath.Join(work, "bin")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return err
	}
	progs := []string{Kubelet, Kubectl}
	if out, err := goRun(ctx, work, "build", "-trimpath", "-ldflags", LDFlags(r), "-o", tmp+"/",
		"k8s.io/kubernetes/cmd/kubelet", "k8s.io/kubernetes/cmd/kubectl"); err != nil {
		return fmt.Errorf("build the kubelet %s: go build: %w\n%s", r.Version, err, tail(out, 20))
	}
	for _, p := range progs {
		if err := install(filepath.Join(tmp, p), filepath.Join(dir, p)); err != nil {
			return fmt.Errorf("build the kubelet %s: %w", r.Version, err)
		}
	}
	return nil
}

// coreDNSMain is CoreDNS with the plugins a node's Corefile uses, in the order they run (CoreDNS's
// documented way to build a server of chosen plugins is a main of its own that sets the directives).
const coreDNSMain = `// Built by chaosbench: CoreDNS with the plugins of a local node's cluster DNS.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/ready"
)

func init() {
	dnsserver.Directives = []string{"bind", "ready", "errors", "kubernetes"}
}

func main() { coremain.Run() }
`

// buildCoreDNS builds CoreDNS into bin.
func buildCoreDNS(ctx context.Context, bin string) error {
	work, err := os.MkdirTemp("", "chaosbench-coredns-build-")
	if err != nil {
		return fmt.Errorf("build CoreDNS %s: %w", CoreDNSVersion, err)
	}
	defer os.RemoveAll(work)
	for name, content := range map[string]string{"go.mod": "module chaosbench-coredns\n\ngo 1.26\n", "main.go": coreDNSMain} {
		if err := os.WriteFile(filepath.Join(work, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("build CoreDNS %s: %w", CoreDNSVersion, err)
		}
	}
	for _, args := range [][]string{{"get", "github.com/coredns/coredns@" + CoreDNSVersion}, {"mod", "tidy"}} {
		if out, err := goRun(ctx, work, args...); err != nil {
			return fmt.Errorf("build CoreDNS %s: go %s: %w\n%s", CoreDNSVersion, strings.Join(args, " "), err, tail(out, 20))
		}
	}
	tmp := filepath.Join(work, CoreDNS)
	if out, err := goRun(ctx, work, "build", "-trimpath", "-o", tmp, "."); err != nil {
		return fmt.Errorf("build CoreDNS %s: go build: %w\n%s", CoreDNSVersion, err, tail(out, 20))
	}
	return install(tmp, bin)
}
