package chaosbench

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"

	"github.com/spf13/pflag"
)

func loadScenario(t *testing.T, yaml string, args ...string) (Scenario, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "scenario.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	s := DefaultScenario()
	fs := pflag.NewFlagSet("run", pflag.ContinueOnError)
	BindFlags(fs, &s)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	err := LoadScenarioFile(path, fs)
	return s, err
}

func TestScenarioFileAndFlags(t *testing.T) {
	s, err := loadScenario(t, `
name: leader-kill
workload: txn-mixed
rate: 2500
duration: 90s
members: 5
etcd-flag:
  heartbeat-interval: 50
  election-timeout: 500
key-space-size: 100000
sequential-keys: true
`, "--rate", "100", "--etcd-flag", "snapshot-count=5000")
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != "leader-kill" || s.Workload != "txn-mixed" || s.Duration != 90*time.Second || s.Members != 5 ||
		s.Micro.KeySpaceSize != 100000 || !s.Micro.SequentialKeys {
		t.Fatalf("file values not applied: %+v", s)
	}
	if s.Rate != 100 {
		t.Fatalf("rate %v: a flag given on the command line must override the file", s.Rate)
	}
	if len(s.EtcdFlags) != 1 || s.EtcdFlags[0] != "snapshot-count=5000" {
		t.Fatalf("etcd flags %v: the command line's list replaces the file's", s.EtcdFlags)
	}

	s, err = loadScenario(t, "etcd-flag:\n  heartbeat-interval: 50\n")
	if err != nil || len(s.EtcdFlags) != 1 || s.EtcdFlags[0] != "heartbeat-interval=50" {
		t.Fatalf("etcd-flag as a mapping: %v %v", s.EtcdFlags, err)
	}
	s, err = loadScenario(t, "endpoints: [http://a:2379, http://b:2379]\ncluster: external\n")
	if err != nil || len(s.Endpoints) != 2 {
		t.Fatalf("endpoints list: %v %v", s.Endpoints, err)
	}
	if _, err := loadScenario(t, ""); err != nil {
		t.Fatalf("an empty file is a valid scenario: %v", err)
	}
}

func TestScenarioFileErrors(t *testing.T) {
	for _, tt := range []struct{ yaml, want string }{
		{"worklaod: put\n", `scenario.yaml:1: unknown setting "worklaod" (did you mean "workload"?)`},
		{"rate: 10\nrate: 20\n", `scenario.yaml:2: "rate" is set twice`},
		{"rate: [1, 2]\n", "scenario.yaml:1: rate: expected a single value"},
		{"duration: soon\n", "scenario.yaml:1: duration"},
		{"config: other.yaml\n", `unknown setting "config"`},
		{"workload: [put\n", "scenario.yaml"},
		{"- a\n", "expected a mapping"},
		{"etcd-flag: [[a]]\n", "expected a plain value"},
	} {
		_, err := loadScenario(t, tt.yaml)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !outcome.IsUsage(err) {
			t.Errorf("scenario %q: error %v, want a usage error containing %q", tt.yaml, err, tt.want)
		}
	}
}

func TestOutDir(t *testing.T) {
	at := time.Date(2026, 11, 21, 10, 4, 5, 0, time.UTC)
	s := DefaultScenario()
	if got := s.OutDir(at); got != filepath.Join("results", "20261121-100405-kube") {
		t.Fatalf("default out dir %q", got)
	}
	s.Name, s.Out = "nightly", ""
	if got := s.OutDir(at); got != filepath.Join("results", "20261121-100405-nightly") {
		t.Fatalf("named out dir %q", got)
	}
}
