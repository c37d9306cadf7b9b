package kubebuild

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/internal/testenv"
	"github.com/etcd-chaosbench/chaosbench/outcome"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in     string
		want   Release
		errHas string
	}{
		{in: "v1.34.4", want: Release{Version: "v1.34.4", Minor: 34, Patch: 4, Staging: "v0.34.4"}},
		{in: " 1.37.2 ", want: Release{Version: "v1.37.2", Minor: 37, Patch: 2, Staging: "v0.37.2"}},
		{in: "v1.35.0-rc.1", want: Release{Version: "v1.35.0-rc.1", Minor: 35, Patch: 0, Staging: "v0.35.0-rc.1"}},
		{in: "v1.32.9", errHas: "1.33 or later"},
		{in: "v2.0.0", errHas: "1.33 or later"},
		{in: "latest", errHas: "expected a Kubernetes release"},
		{in: "v1.34", errHas: "expected a Kubernetes release"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Parse(tt.in)
			if tt.errHas != "" {
				if !outcome.IsUsage(err) || !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("Parse(%q) = %v, want a usage error about %q", tt.in, err, tt.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("Parse(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestStagingModules(t *testing.T) {
	gomod := []byte(`module k8s.io/kubernetes

go 1.24.0

require (
	k8s.io/api v0.0.0
	github.com/x/y v1.0.0
)

replace (
	k8s.io/api => ./staging/src/k8s.io/api
	k8s.io/apimachinery => ./staging/src/k8s.io/apimachinery
	k8s.io/api => ./staging/src/k8s.io/api
	github.com/x/y => github.com/x/y v1.0.1
)

replace k8s.io/cri-client => ./staging/src/k8s.io/cri-client
`)
	got := StagingModules(gomod)
	want := []string{"k8s.io/api", "k8s.io/apimachinery", "k8s.io/cri-client"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("StagingModules = %v, want %v", got, want)
	}
	r, _ := Parse("v1.34.4")
	mod := WrapperGoMod(r, got)
	for _, line := range []string{"require k8s.io/kubernetes v1.34.4", "\tk8s.io/cri-client => k8s.io/cri-client v0.34.4"} {
		if !strings.Contains(mod, line) {
			t.Errorf("wrapper go.mod lacks %q:\n%s", line, mod)
		}
	}
	if !strings.Contains(LDFlags(r), "k8s.io/component-base/version.gitVersion=v1.34.4") {
		t.Errorf("ldflags do not set the version: %s", LDFlags(r))
	}
}

// TestBuildNotServed asks the module proxy for a release it does not serve: one usage error, and nothing
// left in the cache.
func TestBuildNotServed(t *testing.T) {
	r, err := Parse("v1.33.99")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	_, err = Build(ctx, r, Options{CacheDir: dir})
	if !outcome.IsUsage(err) || !strings.Contains(err.Error(), "does not serve") || strings.Contains(err.Error(), "\n") {
		t.Fatalf("got %v, want a one-line usage error saying the proxy does not serve it", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "v1.33.99")); err == nil {
		t.Error("a failed build left a release directory in the cache")
	}
}

// TestCachedBuild checks the default release's binaries in the user's cache (.ci/run builds them with
// `chaosbench image kube`): each reports its release, and Build finds them without building.
func TestCachedBuild(t *testing.T) {
	r, err := Parse(DefaultVersion)
	if err != nil {
		t.Fatal(err)
	}
	b, ok := Cached(r, Options{})
	if !ok {
		testenv.Missing(t, testenv.Kube, "Kubernetes %s is not in the build cache (chaosbench image kube builds it, about 5 minutes)", DefaultVersion)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, bin := range []string{b.APIServer, b.ControllerManager, b.Scheduler} {
		if v, err := ReportedVersion(ctx, bin); err != nil || v != r.Version {
			t.Errorf("%s reports %q, %v", bin, v, err)
		}
	}
	began := time.Now()
	again, err := Build(ctx, r, Options{})
	if err != nil || again != b {
		t.Fatalf("second build: %+v, %v", again, err)
	}
	if took := time.Since(began); took > time.Second {
		t.Errorf("a cached release took %v", took)
	}
}
