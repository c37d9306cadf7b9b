package ci

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

const prowFile = "prow/nightly-chaos-periodic.yaml"

// prowPeriodic is the part of Prow's job configuration (sigs.k8s.io/prow's config.Periodic, as documented
// at docs.prow.k8s.io) that the example uses. Prow's own module is not on the module proxy here; the fields
// are decoded strictly, so that a misspelled or misplaced one fails, and the pod spec is decoded into the
// Kubernetes API type itself.
type prowPeriodic struct {
	Name             string `json:"name"`
	Cron             string `json:"cron,omitempty"`
	Interval         string `json:"interval,omitempty"`
	Cluster          string `json:"cluster,omitempty"`
	Decorate         *bool  `json:"decorate,omitempty"`
	DecorationConfig *struct {
		Timeout string `json:"timeout,omitempty"`
	} `json:"decoration_config,omitempty"`
	ExtraRefs []struct {
		Org       string `json:"org"`
		Repo      string `json:"repo"`
		BaseRef   string `json:"base_ref"`
		PathAlias string `json:"path_alias,omitempty"`
	} `json:"extra_refs,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
	Spec        *corev1.PodSpec   `json:"spec"`
}

// decodeProw decodes the periodic strictly and checks what Prow or the night would refuse: a schedule,
// decoration (which uploads $ARTIFACTS), this repository checked out at the module's import path, and a
// container that runs the nightly suite into $ARTIFACTS, hands its JUnit to TestGrid, and judges the trend.
func decodeProw(content string) (*prowPeriodic, error) {
	var cfg struct {
		Periodics []prowPeriodic `json:"periodics"`
	}
	if err := yaml.UnmarshalStrict([]byte(content), &cfg); err != nil {
		return nil, err
	}
	if len(cfg.Periodics) != 1 {
		return nil, fmt.Errorf("%d periodics, want 1", len(cfg.Periodics))
	}
	p := &cfg.Periodics[0]
	if p.Name == "" {
		return nil, fmt.Errorf("the periodic has no name")
	}
	if (p.Cron == "") == (p.Interval == "") {
		return nil, fmt.Errorf("a periodic needs exactly one of cron and interval")
	}
	if _, err := cron.ParseStandard(p.Cron); err != nil {
		return nil, fmt.Errorf("cron %q: %w", p.Cron, err)
	}
	if p.Decorate == nil || !*p.Decorate {
		return nil, fmt.Errorf("decorate: true is what uploads $ARTIFACTS")
	}
	if len(p.ExtraRefs) != 1 || p.ExtraRefs[0].PathAlias != module {
		return nil, fmt.Errorf("extra_refs: want this repository at %s", module)
	}
	if p.Spec == nil || len(p.Spec.Containers) != 1 || p.Spec.Containers[0].Image == "" {
		return nil, fmt.Errorf("spec: want one container with an image")
	}
	script := strings.Join(append(p.Spec.Containers[0].Command, p.Spec.Containers[0].Args...), " ")
	for _, w := range []string{`chaosbench suite ci/chaos --tags nightly`, `--out "$ARTIFACTS/suite"`, `$ARTIFACTS/junit_`, `chaosbench trend`, `--fail-on-regression`} {
		if !strings.Contains(script, w) {
			return nil, fmt.Errorf("the container's script lacks %s", w)
		}
	}
	return p, nil
}

// module is this repository's import path, where Prow must check it out.
const module = "github.com/etcd-chaosbench/chaosbench"

func TestProwPeriodic(t *testing.T) {
	content, err := os.ReadFile(prowFile)
	if err != nil {
		t.Fatal(err)
	}
	p, err := decodeProw(string(content))
	if err != nil {
		t.Fatal(err)
	}
	if p.Annotations["testgrid-tab-name"] == "" {
		t.Errorf("no testgrid tab: the nights would not be drawn")
	}
	gomod, err := os.ReadFile("../go.mod")
	if err != nil || !strings.HasPrefix(string(gomod), "module "+module+"\n") {
		t.Fatalf("go.mod does not declare %s: %v", module, err)
	}
}

// TestProwPeriodicBroken: the validation fails on broken copies of the file.
func TestProwPeriodicBroken(t *testing.T) {
	content, err := os.ReadFile(prowFile)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"misspelled field", "    decorate: true", "    decorated: true", "unknown field"},
		{"pod field misplaced", "          securityContext:", "          nodeSelector: {}\n          securityContext:", "unknown field"},
		{"bad cron", `cron: "17 2 * * *"`, `cron: "17 2 * *"`, "cron"},
		{"wrong type", `cpu: "4"`, `cpu: four`, "quantities"},
		{"not decorated", "    decorate: true", "    decorate: false", "decorate"},
		{"wrong path", "path_alias: github.com/etcd-chaosbench/chaosbench", "path_alias: github.com/x/y", "extra_refs"},
		{"no junit for testgrid", `$ARTIFACTS/junit_chaosbench.xml`, `$ARTIFACTS/results.xml`, "junit_"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(string(content), tc.old) {
				t.Fatalf("the file has no %q to break", tc.old)
			}
			_, err := decodeProw(strings.Replace(string(content), tc.old, tc.new, 1))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v: want one mentioning %q", err, tc.want)
			}
		})
	}
}
