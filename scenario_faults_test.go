package chaosbench

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/internal/testenv"
	"github.com/etcd-chaosbench/chaosbench/outcome"

	"github.com/spf13/pflag"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/clusters/slowfs"
	"github.com/etcd-chaosbench/chaosbench/faults"
)

// TestScenarioFaults: a scenario file gives the schedule as spec strings, structured entries, or both;
// --faults on the command line replaces the file's schedule.
func TestScenarioFaults(t *testing.T) {
	s, err := loadScenario(t, `
faults:
  - kill:leader@20s+5s
  - fault: partition
    target: minority
    value: in
    at: 40s
    jitter: 2s
    for: 10s
  - fault: nemesis
fault-recovery-timeout: 45s
slowfs: "off"
`)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"kill:leader@20s+5s", "partition:minority=in@40s~2s+10s", "nemesis"}
	if !slices.Equal(s.Faults.Schedule, want) || s.Faults.RecoveryTimeout != 45*time.Second || s.Faults.SlowFS != "off" {
		t.Fatalf("faults %+v, want schedule %v", s.Faults, want)
	}
	s, err = loadScenario(t, "faults: kill:leader@5s\n", "--faults", "none")
	if err != nil || !slices.Equal(s.Faults.Schedule, []string{"none"}) {
		t.Fatalf("--faults none over a file: %v, %v", s.Faults.Schedule, err)
	}
	s, err = loadScenario(t, "", "--faults", "kill:leader@5s", "--faults", "pause:follower@10s")
	if err != nil || !slices.Equal(s.Faults.Schedule, []string{"kill:leader@5s", "pause:follower@10s"}) {
		t.Fatalf("repeated --faults: %v, %v", s.Faults.Schedule, err)
	}
	for _, tt := range []struct{ yaml, want string }{
		{"faults:\n  - fault: kill\n    for: 5s\n", "need at"},
		{"faults:\n  - target: leader\n    at: 5s\n", "needs a fault"},
		{"faults:\n  - [kill]\n", "a fault spec or a mapping"},
	} {
		if _, err := loadScenario(t, tt.yaml); err == nil || !strings.Contains(err.Error(), tt.want) || !outcome.IsUsage(err) {
			t.Errorf("%q: %v, want a usage error containing %q", tt.yaml, err, tt.want)
		}
	}
}

// TestPlanFaults: a plain run gets the default schedule; short runs, single members and external clusters
// get none, and say why.
func TestPlanFaults(t *testing.T) {
	s := DefaultScenario()
	p, err := planFaults(&s)
	if err != nil {
		t.Fatal(err)
	}
	if !p.active() || len(p.sched.Entries) != 2 || p.sched.Entries[0].Spec != "kill:leader@20s+5s" || p.sched.Entries[1].Spec != "partition:leader@40s+10s" {
		t.Fatalf("default plan %+v", p.sched)
	}
	if p.slowfs || p.client {
		t.Fatal("the default schedule needs neither slowfs nor client proxies")
	}
	for name, change := range map[string]func(*Scenario){
		"short":    func(s *Scenario) { s.Duration = 10 * time.Second },
		"single":   func(s *Scenario) { s.Members = 1 },
		"external": func(s *Scenario) { s.Cluster, s.Endpoints = "external", []string{"http://127.0.0.1:2379"} },
		"none":     func(s *Scenario) { s.Faults.Schedule = []string{"none"} },
	} {
		s := DefaultScenario()
		change(&s)
		p, err := planFaults(&s)
		if err != nil || p.active() {
			t.Errorf("%s: plan %+v, %v; want no faults", name, p, err)
		}
		if name != "none" && p.note == "" {
			t.Errorf("%s: no reason given for the missing default faults", name)
		}
	}
	s = DefaultScenario()
	s.Faults.Schedule = []string{"slowdisk:leader=10ms@5s", "partition:leader=clients@10s"}
	if p, err = planFaults(&s); err != nil {
		t.Fatal(err)
	}
	if !p.client {
		t.Error("a partition that cuts clients off needs client proxies")
	}
}

// TestNightlyScenarios: the nightly chaos job's scenario files stay valid.
func TestNightlyScenarios(t *testing.T) {
	files, err := filepath.Glob("ci/chaos/*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no nightly scenarios: %v", err)
	}
	regressions, err := filepath.Glob("ci/chaos/regressions/*.yaml")
	if err != nil || len(regressions) == 0 {
		t.Fatalf("no regression scenarios: %v", err)
	}
	open, err := filepath.Glob("ci/chaos/open/*.yaml")
	if err != nil || len(open) == 0 {
		t.Fatalf("no scenarios of open bugs: %v", err)
	}
	files = append(append(files, regressions...), open...)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			s := DefaultScenario()
			fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
			BindFlags(fs, &s)
			if err := LoadScenarioFile(f, fs); err != nil {
				t.Fatal(err)
			}
			if err := s.validate(); err != nil {
				t.Fatal(err)
			}
			p, err := planFaults(&s)
			if err != nil {
				if slowfs.Available() != nil && strings.Contains(err.Error(), "slowfs") {
					testenv.Missing(t, testenv.FUSE, "needs FUSE: %v", err)
				}
				t.Fatal(err)
			}
			if !p.active() {
				t.Fatal("a nightly chaos scenario without faults")
			}
		})
	}
}

// TestFailpointNamesOfMixedBuilds: with mixed releases a failpoint fault may name only the failpoints
// every member's build has (3.5 has raftBeforeSaveWaitWalSync, 3.6 does not); plain builds have none.
func TestFailpointNamesOfMixedBuilds(t *testing.T) {
	v35 := clusters.EtcdImage{Version: "v3.5.35", Failpoints: []string{"beforeCommit", "raftAfterSave", "raftBeforeSaveWaitWalSync"}}
	v36 := clusters.EtcdImage{Version: "v3.6.16", Failpoints: []string{"beforeCommit", "raftAfterSave"}}
	tests := []struct {
		name   string
		images []clusters.EtcdImage
		want   []string
	}{
		{"one release", []clusters.EtcdImage{v35, v35, v35}, v35.Failpoints},
		{"mixed", []clusters.EtcdImage{v35, v36, v36}, []string{"beforeCommit", "raftAfterSave"}},
		{"plain", []clusters.EtcdImage{{Version: "v3.6.16"}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := failpointNames(tt.images); !slices.Equal(got, tt.want) {
				t.Errorf("failpointNames = %v, want %v", got, tt.want)
			}
		})
	}
	s, err := faults.Parse([]string{"failpoint:follower=raftBeforeSaveWaitWalSync:panic@2s"})
	if err != nil {
		t.Fatal(err)
	}
	err = s.CheckFailpoints(failpointNames([]clusters.EtcdImage{v35, v36, v36}))
	if !outcome.IsUsage(err) || !strings.Contains(err.Error(), "it has beforeCommit, raftAfterSave") {
		t.Errorf("a failpoint only the 3.5 member has: %v, want a usage error listing the common ones", err)
	}
}
