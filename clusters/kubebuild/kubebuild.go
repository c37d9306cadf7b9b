// Package kubebuild builds a Kubernetes control plane (kube-apiserver, kube-controller-manager,
// kube-scheduler) of a chosen release, and the KWOK controller, from the Go module proxy, and caches the
// binaries, as package etcdbuild does for etcd releases.
//
// `go install k8s.io/kubernetes/cmd/kube-apiserver@v` cannot work: k8s.io/kubernetes requires its staging
// modules (k8s.io/api, k8s.io/apiserver, ...) at v0.0.0 and replaces them with ./staging directories the
// module zip does not carry. A temporary wrapper module requires the release and replaces every staging
// module with its published release of the same minor (v1.34.4 -> v0.34.4). The staging list is read from
// the release's own go.mod, so a release that adds a staging module still builds. Version ldflags make the
// binaries report their release, as Kubernetes' own build does.
package kubebuild

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// DefaultVersion is the Kubernetes release built when none is chosen: the minor of the k8s.io/api and
// k8s.io/client-go modules chaosbench links, so that its clients and the apiservers are of one release.
const DefaultVersion = "v1.37.2"

// KWOKVersion is the KWOK release built (sigs.k8s.io/kwok on the module proxy).
const KWOKVersion = "v0.8.0"

// MinMinor is the oldest Kubernetes minor chaosbench builds: older ones need an older Go toolchain than
// this one can build with (and the module proxy serves few of them).
const MinMinor = 33

// The control plane's programs, as named in the cache and in k8s.io/kubernetes/cmd.
const (
	APIServer         = "kube-apiserver"
	ControllerManager = "kube-controller-manager"
	Scheduler         = "kube-scheduler"
	KWOK              = "kwok"
)

// Release is a Kubernetes release that can be built from the module proxy.
type Release struct {
	// Version is the release, normalised: "v1.34.4".
	Version string
	// Minor and Patch are its minor and patch numbers.
	Minor, Patch int
	// Staging is the version of the published staging modules of the release: "v0.34.4".
	Staging string
}

var versionRE = regexp.MustCompile(`^v?(\d+)\.(\d+)\.(\d+)(-[0-9A-Za-z.-]+)?$`)

// Parse checks a release name ("v1.34.4" or "1.34.4"). Anything but a full 1.x.y release of minor MinMinor
// or later is a usage error that says what works.
func Parse(s string) (Release, error) {
	s = strings.TrimSpace(s)
	m := versionRE.FindStringSubmatch(s)
	if m == nil {
		return Release{}, outcome.Usagef("--kube-version %q: expected a Kubernetes release such as %s", s, DefaultVersion)
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	patch, _ := strconv.Atoi(m[3])
	v := "v" + strings.TrimPrefix(s, "v")
	if major != 1 || minor < MinMinor {
		return Release{}, outcome.Usagef("--kube-version %s: chaosbench builds Kubernetes 1.%d or later", v, MinMinor)
	}
	return Release{Version: v, Minor: minor, Patch: patch, Staging: fmt.Sprintf("v0.%d.%d%s", minor, patch, m[4])}, nil
}

// Binaries are the paths of a built control plane.
type Binaries struct {
	APIServer, ControllerManager, Scheduler, KWOK string
	// KWOKStages is the KWOK configuration that simulates kubelets: its own "fast" node and pod stages
	// and the node heartbeat with lease (taken from the KWOK module at build time; the kwok binary has
	// no stages of its own).
	KWOKStages string
}

// Options configures Build.
type Options struct {
	// CacheDir holds the built binaries; default: CacheDir().
	CacheDir string
	// Log receives a line when a build starts and ends (a cold build takes minutes); nil discards them.
	Log io.Writer
}

// CacheDir returns the default cache: <user cache dir>/chaosbench/kube (~/.cache/chaosbench/kube).
func CacheDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find the user cache directory: %w", err)
	}
	return filepath.Join(base, "chaosbench", "kube"), nil
}

func cacheDir(opts Options) (string, error) {
	if opts.CacheDir != "" {
		return opts.CacheDir, nil
	}
	return CacheDir()
}

// paths returns where r's binaries live in dir.
func paths(dir string, r Release) Binaries {
	return Binaries{
		APIServer:         filepath.Join(dir, r.Version, APIServer),
		ControllerManager: filepath.Join(dir, r.Version, ControllerManager),
		Scheduler:         filepath.Join(dir, r.Version, Scheduler),
		KWOK:              filepath.Join(dir, "kwok-"+KWOKVersion, KWOK),
		KWOKStages:        filepath.Join(dir, "kwok-"+KWOKVersion, "stages.yaml"),
	}
}

func (b Binaries) all() []string {
	return []string{b.APIServer, b.ControllerManager, b.Scheduler, b.KWOK, b.KWOKStages}
}

func exists(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// Cached returns r's binaries when every one of them is already built.
func Cached(r Release, opts Options) (Binaries, bool) {
	dir, err := cacheDir(opts)
	if err != nil {
		return Binaries{}, false
	}
	b := paths(dir, r)
	for _, p := range b.all() {
		if !exists(p) {
			return Binaries{}, false
		}
	}
	return b, true
}

// Build returns r's binaries, building what is not cached yet. A release the module proxy does not serve
// is a usage error; the cache is left without a directory for it.
func Build(ctx context.Context, r Release, opts Options) (Binaries, error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if b, ok := Cached(r, opts); ok {
		return b, nil
	}
	dir, err := cacheDir(opts)
	if err != nil {
		return Binaries{}, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "locks"), 0o755); err != nil {
		return Binaries{}, fmt.Errorf("build Kubernetes %s: %w", r.Version, err)
	}
	if _, err := exec.LookPath("go"); err != nil {
		return Binaries{}, fmt.Errorf("build Kubernetes %s: the Go toolchain is needed (go is not in PATH): %w", r.Version, err)
	}
	b := paths(dir, r)
	if !exists(b.APIServer) || !exists(b.ControllerManager) || !exists(b.Scheduler) {
		if err := locked(ctx, filepath.Join(dir, "locks", r.Version+".lock"), func() error {
			if exists(b.APIServer) && exists(b.ControllerManager) && exists(b.Scheduler) {
				return nil // built by someone else while we waited
			}
			began := time.Now()
			if err := buildKubernetes(ctx, r, filepath.Dir(b.APIServer), opts.Log); err != nil {
				return err
			}
			fmt.Fprintf(opts.Log, "built Kubernetes %s in %.0fs\n", r.Version, time.Since(began).Seconds())
			return nil
		}); err != nil {
			return Binaries{}, err
		}
	}
	if !exists(b.KWOK) || !exists(b.KWOKStages) {
		if err := locked(ctx, filepath.Join(dir, "locks", "kwok-"+KWOKVersion+".lock"), func() error {
			if exists(b.KWOK) && exists(b.KWOKStages) {
				return nil
			}
			fmt.Fprintf(opts.Log, "building KWOK %s from the Go module proxy (about 2 minutes, once)\n", KWOKVersion)
			began := time.Now()
			if err := buildKWOK(ctx, b.KWOK, b.KWOKStages); err != nil {
				return err
			}
			fmt.Fprintf(opts.Log, "built KWOK %s in %.0fs\n", KWOKVersion, time.Since(began).Seconds())
			return nil
		}); err != nil {
			return Binaries{}, err
		}
	}
	return b, nil
}

// locked runs f holding the lock file at path.
func locked(ctx context.Context, path string, f func() error) error {
	unlock, err := lock(ctx, path)
	if err != nil {
		return fmt.Errorf("build: %w", err)
	}
	defer unlock()
	return f()
}

// stagingRE matches a staging replace of k8s.io/kubernetes's go.mod: "\tk8s.io/api => ./staging/src/k8s.io/api".
var stagingRE = regexp.MustCompile(`^\s*(?:replace\s+)?(k8s\.io/[A-Za-z0-9._-]+)\s+=>\s+\./staging/`)

// StagingModules returns the modules a k8s.io/kubernetes go.mod replaces with its staging directories,
// sorted.
func StagingModules(gomod []byte) []string {
	seen := map[string]bool{}
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		if m := stagingRE.FindStringSubmatch(sc.Text()); m != nil {
			seen[m[1]] = true
		}
	}
	out := make([]string, 0, len(seen))
	for m := range seen {
		out = append(out, m)
	}
	sort.Strings(out)
	return out
}

// WrapperGoMod returns the go.mod of the wrapper module that builds release r, given its staging modules.
func WrapperGoMod(r Release, staging []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "module chaosbench-kube-%s\n\ngo 1.26\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n", strings.ReplaceAll(r.Version, ".", "-"), r.Version)
	for _, m := range staging {
		fmt.Fprintf(&b, "\t%s => %s %s\n", m, m, r.Staging)
	}
	b.WriteString(")\n")
	return b.String()
}

// LDFlags returns the linker flags that make the binaries report release r (what Kubernetes' build sets
// in component-base and client-go).
func LDFlags(r Release) string {
	var flags []string
	for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
		flags = append(flags,
			"-X", pkg+".gitVersion="+r.Version,
			"-X", pkg+".gitMajor=1",
			"-X", pkg+".gitMinor="+strconv.Itoa(r.Minor),
			"-X", pkg+".gitTreeState=clean",
			"-X", pkg+".buildDate=1970-01-01T00:00:00Z")
	}
	return strings.Join(flags, " ")
}

// goEnv is the environment of every go command of a build: static binaries, independent of the caller's
// workspace and vendoring settings.
func goEnv() []string {
	return append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=mod")
}

// goRun runs one go command in dir and returns its combined output.
func goRun(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = goEnv()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil && ctx.Err() != nil {
		return out.String(), ctx.Err()
	}
	return out.String(), err
}

// releaseGoMod fetches k8s.io/kubernetes@r's go.mod through the module proxy. A version the proxy does
// not serve is a usage error.
func releaseGoMod(ctx context.Context, r Release, work string) ([]byte, error) {
	out, err := goRun(ctx, work, "mod", "download", "-json", "k8s.io/kubernetes@"+r.Version)
	var info struct{ GoMod, Error string }
	if jerr := json.Unmarshal([]byte(out), &info); jerr != nil && err == nil {
		err = jerr
	}
	if info.Error != "" && notServed(info.Error) {
		return nil, outcome.Usagef("--kube-version %s: the Go module proxy does not serve k8s.io/kubernetes@%s (%s)", r.Version, r.Version, strings.TrimSpace(lastLine(info.Error)))
	}
	if err != nil || info.GoMod == "" {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("build Kubernetes %s: %w", r.Version, err)
		}
		return nil, fmt.Errorf("build Kubernetes %s: go mod download k8s.io/kubernetes@%s: %v: %s", r.Version, r.Version, err, tail(strings.TrimSpace(info.Error+"\n"+out), 10))
	}
	data, err := os.ReadFile(info.GoMod)
	if err != nil {
		return nil, fmt.Errorf("build Kubernetes %s: read its go.mod: %w", r.Version, err)
	}
	return data, nil
}

// buildKubernetes builds the three control-plane programs of r into dir.
func buildKubernetes(ctx context.Context, r Release, dir string, log io.Writer) error {
	work, err := os.MkdirTemp("", "chaosbench-kube-build-")
	if err != nil {
		return fmt.Errorf("build Kubernetes %s: %w", r.Version, err)
	}
	defer os.RemoveAll(work)
	gomod, err := releaseGoMod(ctx, r, work)
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "building Kubernetes %s (kube-apiserver, kube-controller-manager, kube-scheduler) from the Go module proxy (about 5 minutes, once: cached in %s)\n", r.Version, filepath.Dir(dir))
	staging := StagingModules(gomod)
	if len(staging) == 0 {
		return fmt.Errorf("build Kubernetes %s: its go.mod replaces no staging modules; cannot derive the wrapper module", r.Version)
	}
	// The blank imports make go mod tidy resolve every package the three commands need.
	main := "// Built by chaosbench: Kubernetes " + r.Version + ".\npackage main\n\nimport (\n" +
		"\t_ \"k8s.io/kubernetes/cmd/kube-apiserver/app\"\n" +
		"\t_ \"k8s.io/kubernetes/cmd/kube-controller-manager/app\"\n" +
		"\t_ \"k8s.io/kubernetes/cmd/kube-scheduler/app\"\n)\n\nfunc main() {}\n"
	for name, content := range map[string]string{"go.mod": WrapperGoMod(r, staging), "main.go": main} {
		if err := os.WriteFile(filepath.Join(work, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("build Kubernetes %s: %w", r.Version, err)
		}
	}
	if out, err := goRun(ctx, work, "mod", "tidy"); err != nil {
		if notServed(out) {
			return outcome.Usagef("--kube-version %s: the Go module proxy does not serve every module it needs (%s)", r.Version, lastLine(out))
		}
		return fmt.Errorf("build Kubernetes %s: go mod tidy: %w\n%s", r.Version, err, tail(out, 20))
	}
	tmp := filepath.Join(work, "bin")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		return fmt.Errorf("build Kubernetes %s: %w", r.Version, err)
	}
	progs := []string{APIServer, ControllerManager, Scheduler}
	args := []string{"build", "-trimpath", "-ldflags", LDFlags(r), "-o", tmp + "/"}
	for _, p := range progs {
		args = append(args, "k8s.io/kubernetes/cmd/"+p)
	}
	if out, err := goRun(ctx, work, args...); err != nil {
		return fmt.Errorf("build Kubernetes %s: go build: %w\n%s", r.Version, err, tail(out, 20))
	}
	for _, p := range progs {
		got, err := ReportedVersion(ctx, filepath.Join(tmp, p))
		if err != nil {
			return fmt.Errorf("build Kubernetes %s: check %s: %w", r.Version, p, err)
		}
		if got != r.Version {
			return fmt.Errorf("build Kubernetes %s: %s reports version %s", r.Version, p, got)
		}
	}
	for _, p := range progs {
		if err := install(filepath.Join(tmp, p), filepath.Join(dir, p)); err != nil {
			return fmt.Errorf("build Kubernetes %s: %w", r.Version, err)
		}
	}
	return nil
}

// kwokStages are the stage files of the KWOK module that make up its "fast" simulation of kubelets (what
// kwokctl configures by default), with node leases: nodes become ready, renew their leases and report
// status every 10-20 minutes; pods become ready as soon as they are bound and go when deleted.
var kwokStages = []string{
	"kustomize/stage/node/fast/node-initialize.yaml",
	"kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
	"kustomize/stage/pod/fast/pod-ready.yaml",
	"kustomize/stage/pod/fast/pod-complete.yaml",
	"kustomize/stage/pod/fast/pod-delete.yaml",
}

// buildKWOK builds the KWOK controller into bin and writes its stages configuration into stages.
func buildKWOK(ctx context.Context, bin, stages string) error {
	work, err := os.MkdirTemp("", "chaosbench-kwok-build-")
	if err != nil {
		return fmt.Errorf("build KWOK %s: %w", KWOKVersion, err)
	}
	defer os.RemoveAll(work)
	tmp := filepath.Join(work, "bin")
	cmd := exec.CommandContext(ctx, "go", "install", "-trimpath", "sigs.k8s.io/kwok/cmd/kwok@"+KWOKVersion)
	cmd.Dir = work
	cmd.Env = append(goEnv(), "GOBIN="+tmp)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("build KWOK %s: %w", KWOKVersion, ctx.Err())
		}
		return fmt.Errorf("build KWOK %s: go install: %w\n%s", KWOKVersion, err, tail(string(out), 20))
	}
	out, err = exec.CommandContext(ctx, "go", "mod", "download", "-json", "sigs.k8s.io/kwok@"+KWOKVersion).Output()
	var mod struct{ Dir string }
	if err == nil {
		err = json.Unmarshal(out, &mod)
	}
	if err != nil || mod.Dir == "" {
		return fmt.Errorf("build KWOK %s: find its module: %v", KWOKVersion, err)
	}
	var conf []string
	for _, f := range kwokStages {
		data, err := os.ReadFile(filepath.Join(mod.Dir, f))
		if err != nil {
			return fmt.Errorf("build KWOK %s: stages: %w", KWOKVersion, err)
		}
		conf = append(conf, strings.TrimSpace(string(data)))
	}
	if err := os.WriteFile(filepath.Join(work, "stages.yaml"), []byte(strings.Join(conf, "\n---\n")+"\n"), 0o644); err != nil {
		return fmt.Errorf("build KWOK %s: %w", KWOKVersion, err)
	}
	if err := install(filepath.Join(work, "stages.yaml"), stages); err != nil {
		return fmt.Errorf("build KWOK %s: %w", KWOKVersion, err)
	}
	return install(filepath.Join(tmp, KWOK), bin)
}

// install copies a built binary into the cache by copy and rename, so that a reader never sees half of
// one.
func install(from, to string) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to+".tmp", os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		os.Remove(to + ".tmp")
		return err
	}
	if err := out.Close(); err != nil {
		os.Remove(to + ".tmp")
		return err
	}
	if err := os.Rename(to+".tmp", to); err != nil {
		os.Remove(to + ".tmp")
		return err
	}
	return nil
}

// ReportedVersion runs `bin --version` and returns the release it reports ("Kubernetes v1.34.4" -> "v1.34.4").
func ReportedVersion(ctx context.Context, bin string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w: %s", bin, err, strings.TrimSpace(string(out)))
	}
	if v, ok := strings.CutPrefix(strings.TrimSpace(string(out)), "Kubernetes "); ok {
		return strings.TrimSpace(v), nil
	}
	return "", fmt.Errorf("%s --version printed no release: %s", bin, strings.TrimSpace(string(out)))
}

// notServed reports whether a go command failed because the proxy has no such version (rather than, say,
// the network being down).
func notServed(out string) bool {
	for _, s := range []string{"unknown revision", "invalid version", "404 Not Found", "403 Forbidden", "no matching versions", "410 Gone", "not found"} {
		if strings.Contains(out, s) {
			return true
		}
	}
	return false
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// lock takes an exclusive flock on path, waiting while ctx allows, and returns its release.
func lock(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("wait for another build of the same release: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// CoreDNSVersion is the CoreDNS release built for a local node's cluster DNS (github.com/coredns/coredns
// on the module proxy).
const CoreDNSVersion = "v1.15.0"

// The programs of a local node, as named in the cache.
const (
	Kubelet = "kubelet"
	Kubectl = "kubectl"
	CoreDNS = "coredns"
)
