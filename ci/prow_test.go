package ci

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/etcd-chaosbench/chaosbench/results"
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
// container that runs ci/prow-nightly.sh with the job's GCS history, discarding no error.
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
	if !strings.Contains(script, prowScript) {
		return nil, fmt.Errorf("the container does not run %s", prowScript)
	}
	if m := historyVar.FindStringSubmatch(script); m == nil {
		return nil, fmt.Errorf("the container does not set HISTORY=gs://BUCKET/logs/$JOB_NAME for %s", prowScript)
	}
	if m := gcloudCommand.FindString(script); m != "" {
		return nil, fmt.Errorf("the container runs gcloud, which its image does not have: %s", m)
	}
	for _, w := range []string{"|| true", "2>/dev/null"} {
		if strings.Contains(script, w) {
			return nil, fmt.Errorf("the container's script has %q: no error may be discarded", w)
		}
	}
	return p, nil
}

// prowScript is what the periodic's container runs; historyVar is how it names the job's GCS history.
const prowScript = "ci/prow-nightly.sh"

var historyVar = regexp.MustCompile(`HISTORY="gs://[a-z0-9._-]+/logs/\$JOB_NAME"`)

// gcloudCommand finds gcloud or gsutil on a line of a script that is not a comment.
var gcloudCommand = regexp.MustCompile(`(?m)^[^#\n]*\b(gcloud|gsutil)\b.*$`)

// checkProwScript checks what ci/prow-nightly.sh must do for the night: run the nightly suite into
// $ARTIFACTS with harness errors retried (and nothing else), hand its JUnit to TestGrid, fetch the history
// without gcloud, and judge the trend.
func checkProwScript(content string) error {
	content = withoutComments(content)
	for _, w := range []string{`chaosbench" suite ci/chaos --tags "${TAGS:-nightly}" --retry-harness --out "$ARTIFACTS/suite"`,
		`$ARTIFACTS/junit_chaosbench.xml`, `chaosbench" trend`, `--fail-on-regression`, "GCS_ENDPOINT", "storage/v1/b/"} {
		if !strings.Contains(content, w) {
			return fmt.Errorf("%s lacks %s", prowScript, w)
		}
	}
	if m := gcloudCommand.FindString(content); m != "" {
		return fmt.Errorf("%s runs gcloud, which the job's image does not have: %s", prowScript, m)
	}
	if strings.Contains(content, "--known-issues=fail") {
		return fmt.Errorf("%s has --known-issues=fail: a known issue passes the night, named", prowScript)
	}
	// The files the fetch keeps are the ones the trend reads.
	for _, f := range []string{results.SuiteFile, results.SummaryFile, results.TimeSeriesFile} {
		if !strings.Contains(content, `"`+f+`"`) {
			return fmt.Errorf("%s does not fetch %s, which the trend reads", prowScript, f)
		}
	}
	return nil
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
	// The nightly page says when TestGrid alerts; the job must do as it says.
	readme, err := os.ReadFile("../docs/nightly.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range []string{"testgrid-num-failures-to-alert", "testgrid-alert-stale-results-hours"} {
		if p.Annotations[a] == "" || !strings.Contains(string(readme), fmt.Sprintf("`%s: %s`", a, p.Annotations[a])) {
			t.Errorf("annotation %s is %q, and docs/nightly.md does not say `%s: %s`", a, p.Annotations[a], a, p.Annotations[a])
		}
	}
	script, err := os.ReadFile(prowScript[len("ci/"):])
	if err != nil {
		t.Fatal(err)
	}
	if err := checkProwScript(string(script)); err != nil {
		t.Error(err)
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
		{"gcloud again", `HISTORY="gs://kubernetes-ci-logs/logs/$JOB_NAME" ci/prow-nightly.sh`, `gcloud storage ls gs://x/ 2>/dev/null; ci/prow-nightly.sh`, "HISTORY"},
		{"errors discarded", "ci/prow-nightly.sh\n", "ci/prow-nightly.sh || true\n", "no error may be discarded"},
		{"another script", `$JOB_NAME" ci/prow-nightly.sh`, `$JOB_NAME" ci/nightly-chaos.sh`, "does not run ci/prow-nightly.sh"},
		{"gcloud in the container", "apt-get update", "gcloud storage ls gs://x/; apt-get update", "runs gcloud"},
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

// withoutComments drops a script's comment lines, so that what it says it does is not taken for what it does.
func withoutComments(script string) string {
	var out []string
	for _, line := range strings.Split(script, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestProwScriptBroken: the script's check fails on broken copies of ci/prow-nightly.sh.
func TestProwScriptBroken(t *testing.T) {
	content, err := os.ReadFile(prowScript[len("ci/"):])
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"no retry of harness errors", `--tags "${TAGS:-nightly}" --retry-harness --out`, `--tags "${TAGS:-nightly}" --out`, "lacks"},
		{"another default tag", `--tags "${TAGS:-nightly}"`, `--tags "${TAGS:-smoke}"`, "lacks"},
		{"known issues fail the night", `--out "$ARTIFACTS/suite" || status`, `--out "$ARTIFACTS/suite" --known-issues=fail || status`, "--known-issues=fail"},
		{"no junit for testgrid", `"$ARTIFACTS/junit_chaosbench.xml" ||`, `"$ARTIFACTS/results.xml" ||`, "junit_"},
		{"no trend gate", `--out "$ARTIFACTS/trend" --fail-on-regression`, `--out "$ARTIFACTS/trend"`, "--fail-on-regression"},
		{"gcloud", `if python3 - "$history"`, `if gcloud storage cp -r "$history" "$nights_dir" && python3 - "$history"`, "runs gcloud"},
		{"no time series", `"timeseries.jsonl"`, `"series.jsonl"`, "timeseries.jsonl"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(string(content), tc.old) {
				t.Fatalf("the script has no %q to break", tc.old)
			}
			err := checkProwScript(strings.Replace(string(content), tc.old, tc.new, 1))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v: want one mentioning %q", err, tc.want)
			}
		})
	}
}
