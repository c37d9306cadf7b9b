package chaosbench

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/workloads/kube"
)

// TestProfileFromRun profiles the scrapes a controlplane run saves (metrics/NAME.N.prom; testdata's recorded
// files here) and runs the kube workload's plan from the profile at a scale.
func TestProfileFromRun(t *testing.T) {
	run := t.TempDir()
	if err := os.MkdirAll(filepath.Join(run, MetricsDir), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"kube-apiserver-0", "kube-apiserver-1", "etcd-0"} {
		for _, n := range []string{"1", "2"} {
			data, err := os.ReadFile(filepath.Join("workloads", "kube", "profile", "testdata", name+"."+n+".prom"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(run, MetricsDir, name+"."+n+".prom"), data, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	file := filepath.Join(t.TempDir(), "p.yaml")
	var out bytes.Buffer
	p, err := Profile(t.Context(), ProfileOptions{Run: run, Out: file}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if p.Source.Apiservers != 2 || p.Source.EtcdMembers != 1 || !strings.Contains(out.String(), "assumed resources.events.mean_bytes") {
		t.Errorf("profile of %d apiservers and %d members; printed:\n%s", p.Source.Apiservers, p.Source.EtcdMembers, out.String())
	}
	s := DefaultScenario()
	s.Profile, s.Scale = file, 2
	o, err := s.kubeOptions()
	if err != nil {
		t.Fatal(err)
	}
	if o.Nodes != 100 || o.Churn != 4 || o.Apiservers != 2 || !strings.HasPrefix(o.Label, "profile ") {
		t.Errorf("2x options %+v", o)
	}
	// Explicit settings override the profile's.
	s.Kube = kube.Options{Churn: 7, ObjectSizes: "pods=1k"}
	if o, _ := s.kubeOptions(); o.Churn != 7 || !strings.HasSuffix(o.ObjectSizes, ",pods=1k") || o.Nodes != 100 {
		t.Errorf("with --churn 7 --object-sizes pods=1k: %+v", o)
	}
	for name, bad := range map[string]Scenario{
		"--profile and --preset": {Profile: file, Kube: kube.Options{Preset: "small"}},
		"--scale alone":          {Scale: 2},
		"--scale-rates alone":    {ScaleRates: true},
		"--scale 0.001":          {Profile: file, Scale: 0.001},
		"a profile that is not":  {Profile: filepath.Join(run, MetricsDir, "etcd-0.1.prom")},
	} {
		if _, err := bad.kubeOptions(); !outcome.IsUsage(err) {
			t.Errorf("%s: %v, want a usage error", name, err)
		}
	}
	if _, err := Profile(t.Context(), ProfileOptions{Run: t.TempDir()}, &out); !outcome.IsUsage(err) {
		t.Errorf("--run of a directory without scrapes: %v, want a usage error", err)
	}
}

// TestGrowthLadderAtPreset: qualify --profile with a preset's profile (ci/profiles) runs, at 1x, the
// preset class's own step: the same plan, so the two ladders agree where a profile equals a preset.
func TestGrowthLadderAtPreset(t *testing.T) {
	for _, preset := range kube.Presets {
		o := DefaultQualifyOptions()
		o.Profile = filepath.Join("ci", "profiles", preset+".yaml")
		grown := o.stepScenario("1x", "", 1)
		opts, err := grown.kubeOptions()
		if err != nil {
			t.Fatal(err)
		}
		got, err := opts.Resolve(grown.Duration)
		if err != nil {
			t.Fatal(err)
		}
		o.Profile = ""
		class := o.stepScenario(preset, "", 1)
		want, err := class.Kube.Resolve(class.Duration)
		if err != nil {
			t.Fatal(err)
		}
		a, b := got.Plan(1), want.Plan(1)
		if len(a) != len(b) {
			t.Fatalf("%s: %d planned operations at 1x, %d in the class's step", preset, len(a), len(b))
		}
		for i := range a {
			if a[i].Op != b[i].Op || a[i].Rate < 0.999*b[i].Rate || a[i].Rate > 1.001*b[i].Rate {
				t.Errorf("%s: %s %g/s at 1x, %s %g/s in the class's step", preset, a[i].Op, a[i].Rate, b[i].Op, b[i].Rate)
			}
		}
	}
}
