// Package etcdbuild builds etcd server binaries of any release from the Go module proxy and caches them, so
// that chaosbench can run, compare and mix etcd versions without anything installed.
//
// A release is built from a tiny main package in a temporary module that requires the release's server
// module and calls its etcdmain, exactly as etcd's own main does, with CGO disabled: the binary is static
// and runs in a FROM scratch image as well as on the host. `go install` cannot build etcd (its modules
// carry replace directives), which is why the temporary module exists. Binaries are cached per release
// under the user's cache directory; concurrent builders of one release (two test binaries, two runs) wait
// for each other through a lock file instead of building twice.
package etcdbuild

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// Builtin names the etcd server linked into chaosbench itself, run through its hidden member mode. It needs
// no build.
const Builtin = "builtin"

// Release is an etcd server release that can be built from the module proxy.
type Release struct {
	// Version is the release as users write it, normalised: "v3.6.16".
	Version string
	// Module and ModuleVersion are what the temporary module requires.
	Module        string
	ModuleVersion string
	// Import is the package with etcd's command-line front end; MainCall calls it.
	Import   string
	MainCall string
	// Minor is the release's minor version (4 for v3.4.13), for features that differ between releases.
	Minor int
	// Failpoints builds the release with gofail's failpoints enabled (see failpoints.go); cached apart
	// from the plain build.
	Failpoints bool
}

// key names r's build in the cache: the version, with a suffix for a failpoint build.
func (r Release) key() string {
	if r.Failpoints {
		return r.Version + "-failpoints"
	}
	return r.Version
}

// String is the release as logs name it: "v3.6.16" or "v3.6.16 (failpoints)".
func (r Release) String() string {
	if r.Failpoints {
		return r.Version + " (failpoints)"
	}
	return r.Version
}

// The only 3.4 release the module proxy serves: 3.4.13 plus two cherry-picks, published under the
// pre-3.5 module path with a pseudo-version (3.4 has no go.etcd.io/etcd/server/v3 module).
const (
	v34Version = "v3.4.13"
	v34Module  = "go.etcd.io/etcd"
	v34Pseudo  = "v0.5.0-alpha.5.0.20200910180754-dd1b699fc489"
)

var versionRE = regexp.MustCompile(`^v?(\d+)\.(\d+)\.(\d+)(-[0-9A-Za-z.-]+)?$`)

// Parse checks a release name ("v3.5.35" or "3.5.35") and says how to build it. Unsupported releases are
// usage errors that say which ones work.
func Parse(s string) (Release, error) {
	m := versionRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return Release{}, outcome.Usagef("etcd version %q: expected a release such as v3.6.16 (or %s)", s, Builtin)
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	v := "v" + strings.TrimPrefix(strings.TrimSpace(s), "v")
	switch {
	case major != 3 || minor < 4:
		return Release{}, outcome.Usagef("etcd version %s: chaosbench builds etcd 3.4.13 and 3.5 or later", v)
	case minor == 4 && v != v34Version:
		return Release{}, outcome.Usagef("etcd version %s: the only 3.4 release the Go module proxy serves is %s", v, v34Version)
	case minor == 4:
		return Release{Version: v, Module: v34Module, ModuleVersion: v34Pseudo,
			Import: "go.etcd.io/etcd/etcdmain", MainCall: "etcdmain.Main()", Minor: minor}, nil
	}
	return Release{Version: v, Module: "go.etcd.io/etcd/server/v3", ModuleVersion: v,
		Import: "go.etcd.io/etcd/server/v3/etcdmain", MainCall: "etcdmain.Main(os.Args)", Minor: minor}, nil
}

// Options configures Build.
type Options struct {
	// CacheDir holds the built binaries; default: CacheDir().
	CacheDir string
	// Log receives a line when a build starts (builds take about a minute); nil discards it.
	Log io.Writer
}

// CacheDir returns the default cache: <user cache dir>/chaosbench/etcd (~/.cache/chaosbench/etcd).
func CacheDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("find the user cache directory: %w", err)
	}
	return filepath.Join(base, "chaosbench", "etcd"), nil
}

// Cached returns the path of r's binary when it is already built. A 3.5 failpoint build made without the
// current set of inserted failpoints (inserts.go) is not: it is built again.
func Cached(r Release, opts Options) (string, bool) {
	dir, err := cacheDir(opts)
	if err != nil {
		return "", false
	}
	bin := filepath.Join(dir, r.key(), "etcd")
	if st, err := os.Stat(bin); err != nil || !st.Mode().IsRegular() {
		return "", false
	}
	if r.Failpoints && r.Minor == 5 {
		record, err := os.ReadFile(filepath.Join(dir, r.key(), InsertsFile))
		if err != nil || !strings.HasPrefix(string(record), insertsVersion+"\n") {
			return "", false
		}
	}
	return bin, true
}

func cacheDir(opts Options) (string, error) {
	if opts.CacheDir != "" {
		return opts.CacheDir, nil
	}
	return CacheDir()
}

// Build returns the path of release r's static etcd binary, building it first when it is not cached. A
// release the module proxy does not serve is a usage error.
func Build(ctx context.Context, r Release, opts Options) (string, error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if bin, ok := Cached(r, opts); ok {
		return bin, nil
	}
	dir, err := cacheDir(opts)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("build etcd %s: %w", r.Version, err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "locks"), 0o755); err != nil {
		return "", fmt.Errorf("build etcd %s: %w", r.Version, err)
	}
	unlock, err := lock(ctx, filepath.Join(dir, "locks", r.key()+".lock"))
	if err != nil {
		return "", fmt.Errorf("build etcd %s: %w", r.Version, err)
	}
	defer unlock()
	// Someone else may have built it while we waited for the lock.
	if bin, ok := Cached(r, opts); ok {
		return bin, nil
	}
	if _, err := exec.LookPath("go"); err != nil {
		return "", fmt.Errorf("build etcd %s: the Go toolchain is needed to build etcd releases (go is not in PATH): %w", r.Version, err)
	}
	fmt.Fprintf(opts.Log, "building etcd %s from the Go module proxy (about a minute, once: cached in %s)\n", r, dir)
	began := time.Now()
	bin := filepath.Join(dir, r.key(), "etcd")
	if err := build(ctx, r, bin, opts.Log); err != nil {
		return "", err
	}
	fmt.Fprintf(opts.Log, "built etcd %s in %.0fs\n", r, time.Since(began).Seconds())
	return bin, nil
}

// build builds r into bin through a temporary module, then checks that the binary reports the release.
func build(ctx context.Context, r Release, bin string, log io.Writer) error {
	work, err := os.MkdirTemp("", "chaosbench-etcd-build-")
	if err != nil {
		return fmt.Errorf("build etcd %s: %w", r.Version, err)
	}
	defer os.RemoveAll(work)
	main := fmt.Sprintf("// Built by chaosbench: etcd %s.\npackage main\n\nimport (\n\t\"os\"\n\n\t%q\n)\n\nvar _ = os.Args\n\nfunc main() { %s }\n",
		r.Version, r.Import, r.MainCall)
	files := map[string]string{
		"go.mod":  "module chaosbench-etcd-" + strings.ReplaceAll(r.Version, ".", "-") + "\n\ngo 1.26\n",
		"main.go": main,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(work, name), []byte(content), 0o644); err != nil {
			return fmt.Errorf("build etcd %s: %w", r.Version, err)
		}
	}
	tmp := filepath.Join(work, "etcd")
	steps := [][]string{
		{"go", "get", r.Module + "@" + r.ModuleVersion},
		{"go", "mod", "tidy"},
		{"go", "build", "-trimpath", "-o", tmp, "."},
	}
	var names, inserted []string
	if r.Failpoints {
		// The server module, copied and rewritten by gofail, replaces the proxy's (failpoints.go).
		var err error
		if names, inserted, err = enableFailpoints(ctx, r, work, log); err != nil {
			return err
		}
		steps = steps[1:]
	}
	for _, step := range steps {
		cmd := exec.CommandContext(ctx, step[0], step[1:]...)
		cmd.Dir = work
		// Static (FROM scratch images), independent of the caller's workspace and vendoring settings.
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=mod")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("build etcd %s: %w", r.Version, ctx.Err())
			}
			text := strings.TrimSpace(out.String())
			if step[1] == "get" && notServed(text) {
				return outcome.Usagef("etcd version %s: the Go module proxy does not serve %s@%s (%s)", r.Version, r.Module, r.ModuleVersion, strings.TrimSpace(lastLine(text)))
			}
			return fmt.Errorf("build etcd %s: %s: %w\n%s", r.Version, strings.Join(step, " "), err, tail(text, 20))
		}
	}
	got, err := ReportedVersion(ctx, tmp)
	if err != nil {
		return fmt.Errorf("build etcd %s: check the binary: %w", r.Version, err)
	}
	if want := strings.TrimPrefix(r.Version, "v"); got != want {
		return fmt.Errorf("build etcd %s: the binary reports version %s", r.Version, got)
	}
	// Into the cache by copy and rename, so that a reader never sees half a binary.
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return fmt.Errorf("build etcd %s: %w", r.Version, err)
	}
	if err := copyFile(tmp, bin+".tmp"); err != nil {
		return fmt.Errorf("build etcd %s: %w", r.Version, err)
	}
	if r.Failpoints {
		// The list first: a cached binary always has its list beside it.
		if err := os.WriteFile(filepath.Join(filepath.Dir(bin), FailpointsFile), []byte(strings.Join(names, "\n")+"\n"), 0o644); err != nil {
			return fmt.Errorf("build etcd %s: %w", r, err)
		}
		if r.Minor == 5 {
			record := strings.Join(append([]string{insertsVersion}, inserted...), "\n") + "\n"
			if err := os.WriteFile(filepath.Join(filepath.Dir(bin), InsertsFile), []byte(record), 0o644); err != nil {
				return fmt.Errorf("build etcd %s: %w", r, err)
			}
		}
	}
	if err := os.Rename(bin+".tmp", bin); err != nil {
		os.Remove(bin + ".tmp")
		return fmt.Errorf("build etcd %s: %w", r.Version, err)
	}
	return nil
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// ReportedVersion runs `bin --version` and returns the "etcd Version:" it prints (without a leading v).
func ReportedVersion(ctx context.Context, bin string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w: %s", bin, err, strings.TrimSpace(string(out)))
	}
	for _, line := range strings.Split(string(out), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "etcd Version:"); ok {
			return strings.TrimSpace(v), nil
		}
	}
	return "", fmt.Errorf("%s --version printed no version: %s", bin, strings.TrimSpace(string(out)))
}

// notServed reports whether go get failed because the proxy has no such version (rather than, say, the
// network being down).
func notServed(out string) bool {
	for _, s := range []string{"unknown revision", "invalid version", "404 Not Found", "403 Forbidden", "no matching versions", "410 Gone"} {
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
