// Package ci holds tests of the CI assets a team adopts as they are: the GitHub Actions workflow of the
// nightly chaos job.
package ci

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rhysd/actionlint"
	"gopkg.in/yaml.v3"
)

const workflow = "../.github/workflows/nightly-chaos.yml"

// lint runs actionlint (without shellcheck and pyflakes, which need binaries) on a workflow's content.
func lint(t *testing.T, content []byte) []*actionlint.Error {
	t.Helper()
	l, err := actionlint.NewLinter(io.Discard, &actionlint.LinterOptions{})
	if err != nil {
		t.Fatal(err)
	}
	errs, err := l.Lint(filepath.Base(workflow), content, nil)
	if err != nil {
		t.Fatal(err)
	}
	return errs
}

// TestWorkflowLints: actionlint finds nothing in the workflow, and finds each kind of breakage in a
// broken copy of it, so the test cannot pass by checking nothing.
func TestWorkflowLints(t *testing.T) {
	content, err := os.ReadFile(workflow)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range lint(t, content) {
		t.Errorf("%s", e.Error())
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"unknown matrix property", "${{ matrix.etcd }}\n", "${{ matrix.etcd_version }}\n", "etcd_version"},
		{"misspelled step key", "        run: make build", "        runs: make build", `"run" section`},
		{"bad cron", `"17 2 * * *"`, `"17 25 * * *"`, "CRON"},
		{"unknown input", "inputs.tags ||", "inputs.tag ||", "tag"},
		{"bad indentation", "    runs-on: ubuntu-latest", "   runs-on: ubuntu-latest", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(string(content), tc.old) {
				t.Fatalf("the workflow no longer holds %q: update the test", tc.old)
			}
			broken := strings.Replace(string(content), tc.old, tc.new, 1)
			errs := lint(t, []byte(broken))
			if len(errs) == 0 {
				t.Fatal("actionlint found nothing wrong with the broken copy")
			}
			var msgs []string
			for _, e := range errs {
				msgs = append(msgs, e.Error())
			}
			if !strings.Contains(strings.Join(msgs, "\n"), tc.want) {
				t.Fatalf("no error mentions %q: %v", tc.want, msgs)
			}
		})
	}
}

// TestWorkflowShape: the workflow runs nightly and on demand, over etcd versions and shards, with as many
// shards in the matrix as the suite command splits into, and keeps its results whatever the verdict.
func TestWorkflowShape(t *testing.T) {
	content, err := os.ReadFile(workflow)
	if err != nil {
		t.Fatal(err)
	}
	var wf struct {
		On   map[string]yaml.Node `yaml:"on"`
		Env  map[string]string    `yaml:"env"`
		Jobs map[string]struct {
			Strategy struct {
				Matrix struct {
					Etcd  []string `yaml:"etcd"`
					Shard []int    `yaml:"shard"`
				} `yaml:"matrix"`
			} `yaml:"strategy"`
			Steps []struct {
				Name string            `yaml:"name"`
				Uses string            `yaml:"uses"`
				If   string            `yaml:"if"`
				Run  string            `yaml:"run"`
				With map[string]string `yaml:"with"`
			} `yaml:"steps"`
		} `yaml:"jobs"`
	}
	if err := yaml.Unmarshal(content, &wf); err != nil {
		t.Fatal(err)
	}
	for _, trigger := range []string{"schedule", "workflow_dispatch"} {
		if _, ok := wf.On[trigger]; !ok {
			t.Errorf("no %s trigger", trigger)
		}
	}
	job, ok := wf.Jobs["suite"]
	if !ok {
		t.Fatal("no suite job")
	}
	m := job.Strategy.Matrix
	if len(m.Etcd) < 2 || len(m.Shard) < 2 {
		t.Errorf("matrix: etcd %v, shards %v", m.Etcd, m.Shard)
	}
	for i, s := range m.Shard {
		if s != i+1 {
			t.Errorf("shards %v: want 1..N", m.Shard)
		}
	}
	if wf.Env["SHARDS"] != strconv.Itoa(len(m.Shard)) {
		t.Errorf("SHARDS=%s but the matrix has %d shards: some scenarios would never run", wf.Env["SHARDS"], len(m.Shard))
	}
	var suiteRun, downloadRun, trendRun string
	var uses []string
	for _, s := range job.Steps {
		if strings.Contains(s.Run, "gh run download") {
			downloadRun = s.Run
		}
		if strings.Contains(s.Run, "chaosbench trend") {
			trendRun = s.Run
		}
		uses = append(uses, strings.Split(s.Uses, "@")[0])
		if strings.Contains(s.Run, "chaosbench suite") {
			suiteRun = s.Run
		}
		if (s.Uses != "" && strings.Contains(s.Uses, "upload-artifact")) || strings.Contains(s.Run, "GITHUB_STEP_SUMMARY") || strings.Contains(s.Uses, "junit") {
			if !strings.HasPrefix(s.If, "always()") {
				t.Errorf("step %q must run whatever the verdict (if: always())", s.Name)
			}
		}
	}
	// The previous nights are the baseline of the trend, which decides the job on a regression.
	if !strings.Contains(downloadRun, "--dir \"history/") {
		t.Errorf("no step downloads the previous nights into history/: %q", downloadRun)
	}
	for _, w := range []string{"history", "results/suite", "--fail-on-regression"} {
		if !strings.Contains(trendRun, w) {
			t.Errorf("the trend step lacks %s: %q", w, trendRun)
		}
	}
	for _, w := range []string{`--shard "$SHARD/$SHARDS"`, "etcd-version=$ETCD", "--retry-harness", "--out results/suite"} {
		if !strings.Contains(suiteRun, w) {
			t.Errorf("the suite step lacks %s: %s", w, suiteRun)
		}
	}
	for _, u := range []string{"actions/setup-go", "actions/cache", "actions/upload-artifact", "mikepenz/action-junit-report"} {
		if !slices.Contains(uses, u) {
			t.Errorf("no step uses %s", u)
		}
	}
}

// workflowStep is what the outcome rules read of a step.
type workflowStep struct {
	Name            string            `yaml:"name"`
	ID              string            `yaml:"id"`
	Uses            string            `yaml:"uses"`
	If              string            `yaml:"if"`
	Run             string            `yaml:"run"`
	With            map[string]string `yaml:"with"`
	ContinueOnError any               `yaml:"continue-on-error"`
}

// workflowOutcomeProblems returns how the workflow breaks the README's rules for outcomes: the suite's exit
// code decides the night (nothing swallows it, nothing but --retry-harness retries, known issues pass by
// default), and the history is downloaded with every error but a missing artifact failing the step, the
// trend judged only on a history that downloaded.
func workflowOutcomeProblems(content []byte) []string {
	var wf struct {
		Jobs map[string]struct {
			ContinueOnError any            `yaml:"continue-on-error"`
			Steps           []workflowStep `yaml:"steps"`
		} `yaml:"jobs"`
	}
	if err := yaml.Unmarshal(content, &wf); err != nil {
		return []string{err.Error()}
	}
	job, ok := wf.Jobs["suite"]
	if !ok {
		return []string{"no suite job"}
	}
	var out []string
	if job.ContinueOnError != nil {
		out = append(out, "the job has continue-on-error: a red night would pass")
	}
	var history *workflowStep
	for i, s := range job.Steps {
		if s.ContinueOnError != nil {
			out = append(out, fmt.Sprintf("step %q has continue-on-error: its failure would not fail the night", s.Name))
		}
		if strings.Contains(strings.ToLower(s.Uses), "retry") {
			out = append(out, fmt.Sprintf("step %q retries (%s): a violation must never be run again", s.Name, s.Uses))
		}
		if strings.Contains(s.Run, "--known-issues=fail") {
			out = append(out, fmt.Sprintf("step %q fails on known issues: they pass the night, named", s.Name))
		}
		if strings.Contains(s.Run, "chaosbench suite") {
			if !strings.Contains(s.Run, "--retry-harness") {
				out = append(out, "the suite runs without --retry-harness")
			}
			if strings.Contains(s.Run, "||") || strings.Contains(s.Run, "; true") {
				out = append(out, "the suite's exit code is swallowed")
			}
		}
		if strings.Contains(s.Run, "gh run download") {
			history = &job.Steps[i]
		}
		if strings.Contains(s.Uses, "junit") && strings.EqualFold(s.With["fail_on_failure"], "true") {
			out = append(out, "the JUnit publisher fails the night on its own: the suite's exit code decides")
		}
	}
	if history == nil {
		return append(out, "no step downloads the previous nights")
	}
	switch {
	case history.ID == "":
		out = append(out, "the history step has no id: the trend cannot depend on it")
	case !strings.Contains(history.Run, "set -euo pipefail"):
		out = append(out, "the history step does not fail on errors (set -euo pipefail)")
	case strings.Contains(history.Run, "||"):
		out = append(out, "the history step discards errors (||)")
	}
	for _, s := range job.Steps {
		if strings.Contains(s.Run, "chaosbench trend") && !strings.Contains(s.If, "steps."+history.ID+".outcome == 'success'") {
			out = append(out, "the trend is judged even when the history did not download")
		}
	}
	return out
}

// TestWorkflowOutcomes: the workflow keeps the README's rules for outcomes, and breaking each one is found.
func TestWorkflowOutcomes(t *testing.T) {
	content, err := os.ReadFile(workflow)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range workflowOutcomeProblems(content) {
		t.Error(p)
	}
	for _, tc := range []struct{ name, old, new, want string }{
		{"exit code swallowed", "--retry-harness --out results/suite", "--retry-harness --out results/suite || true", "swallowed"},
		{"no retry of harness errors", "--retry-harness --out results/suite", "--out results/suite", "without --retry-harness"},
		{"known issues fail", "--retry-harness --out results/suite", "--retry-harness --known-issues=fail --out results/suite", "known issues"},
		{"suite may fail", "      - name: Run the suite\n", "      - name: Run the suite\n        continue-on-error: true\n", "continue-on-error"},
		{"download errors discarded", `--dir "history/$id"`, `--dir "history/$id" || echo "night $id: none"`, "discards errors"},
		{"download without -e", "set -euo pipefail\n          mkdir -p history", "mkdir -p history", "set -euo pipefail"},
		{"trend on a lost history", "steps.history.outcome == 'success' && ", "", "did not download"},
		{"junit decides", "require_tests: true", "require_tests: true\n          fail_on_failure: true", "JUnit publisher"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(string(content), tc.old) {
				t.Fatalf("the workflow no longer holds %q: update the test", tc.old)
			}
			ps := workflowOutcomeProblems([]byte(strings.Replace(string(content), tc.old, tc.new, 1)))
			if !strings.Contains(strings.Join(ps, "\n"), tc.want) {
				t.Fatalf("problems %q: want one saying %q", ps, tc.want)
			}
		})
	}
}

// TestEveryWorkflowLints: actionlint finds nothing in any workflow of .github/workflows (TestWorkflowLints
// shows on the nightly one that it finds breakage).
func TestEveryWorkflowLints(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", ".github", "workflows", "*.yml"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 2 {
		t.Fatalf("expected the nightly and the weekly regression workflows, found %v", files)
	}
	for _, file := range files {
		content, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range lint(t, content) {
			t.Errorf("%s: %s", file, e.Error())
		}
	}
}
