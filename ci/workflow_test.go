// Package ci holds tests of the CI assets a team adopts as they are: the GitHub Actions workflow of the
// nightly chaos job.
package ci

import (
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
