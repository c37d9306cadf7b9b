package chaosbench

import (
	"os"
	"path/filepath"
	"slices"
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

// TestExternalEndpointsAndEnvironment: an external cluster's endpoints and TLS files come from the flags,
// then the scenario file, then etcdctl's variables, each variable standing in for its own flag; the
// variables are ignored for clusters chaosbench starts; endpoints end up as the URLs the client dials.
func TestExternalEndpointsAndEnvironment(t *testing.T) {
	allEnv := map[string]string{
		"ETCDCTL_ENDPOINTS": "10.0.0.9:2379,10.0.0.10:2379",
		"ETCDCTL_CACERT":    "/env/ca.pem", "ETCDCTL_CERT": "/env/c.pem", "ETCDCTL_KEY": "/env/k.pem",
	}
	for _, tt := range []struct {
		name      string
		yaml      string
		args      []string
		env       map[string]string
		endpoints []string // after validation
		cacert    string
		wantErr   string
	}{
		{name: "host:port flag", args: []string{"--cluster", "external", "--endpoints", "127.0.0.1:2379"},
			endpoints: []string{"http://127.0.0.1:2379"}},
		{name: "comma-separated flag", args: []string{"--cluster", "external", "--endpoints", "127.0.0.1:2379,http://127.0.0.1:22379"},
			endpoints: []string{"http://127.0.0.1:2379", "http://127.0.0.1:22379"}},
		{name: "host:port with --cacert is https", args: []string{"--cluster", "external", "--endpoints", "a:1", "--cacert", "ca.pem"},
			endpoints: []string{"https://a:1"}, cacert: "ca.pem"},
		{name: "file list in one string", yaml: "cluster: external\nendpoints: a:1,b:2\n",
			endpoints: []string{"http://a:1", "http://b:2"}},
		{name: "file list mixing plaintext and TLS", yaml: "cluster: external\nendpoints: [a:1, 'https://b:2']\n", wantErr: "cannot mix plaintext and TLS"},
		{name: "all from the environment", args: []string{"--cluster", "external"}, env: allEnv,
			endpoints: []string{"https://10.0.0.9:2379", "https://10.0.0.10:2379"}, cacert: "/env/ca.pem"},
		{name: "endpoints only from the environment", args: []string{"--cluster", "external"},
			env:       map[string]string{"ETCDCTL_ENDPOINTS": "127.0.0.1:2379"},
			endpoints: []string{"http://127.0.0.1:2379"}},
		{name: "flags win over the environment", args: []string{"--cluster", "external", "--endpoints", "a:1", "--cacert", "ca.pem", "--cert", "c.pem", "--key", "k.pem"},
			env: allEnv, endpoints: []string{"https://a:1"}, cacert: "ca.pem"},
		{name: "the file wins over the environment", yaml: "cluster: external\nendpoints: [a:1]\ncacert: file-ca.pem\n",
			env: allEnv, endpoints: []string{"https://a:1"}, cacert: "file-ca.pem"},
		{name: "each variable stands in for its own flag", args: []string{"--cluster", "external", "--endpoints", "a:1"},
			env: map[string]string{"ETCDCTL_ENDPOINTS": "b:2", "ETCDCTL_CACERT": "/env/ca.pem"}, endpoints: []string{"https://a:1"}, cacert: "/env/ca.pem"},
		{name: "an empty variable is absent", args: []string{"--cluster", "external"}, env: map[string]string{"ETCDCTL_ENDPOINTS": " "},
			wantErr: "--cluster external needs --endpoints (or ETCDCTL_ENDPOINTS)"},
		{name: "a bad variable is named", args: []string{"--cluster", "external"}, env: map[string]string{"ETCDCTL_ENDPOINTS": "localhost"},
			wantErr: `ETCDCTL_ENDPOINTS "localhost": no port`},
		{name: "a bad flag is named", args: []string{"--cluster", "external", "--endpoints", "127.0.0.1:2379,ftp://x:1"},
			wantErr: `--endpoints "ftp://x:1": unknown scheme "ftp"`},
		{name: "embed ignores the environment", env: allEnv},
		{name: "docker ignores the environment", args: []string{"--cluster", "docker"}, env: allEnv},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := loadScenario(t, tt.yaml, tt.args...)
			if err != nil {
				t.Fatal(err)
			}
			err = s.UseEnvironment(func(key string) (string, bool) {
				v, ok := tt.env[key]
				return v, ok
			})
			if err == nil {
				err = s.validate()
			}
			if tt.wantErr != "" {
				if err == nil || !outcome.IsUsage(err) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want a usage error containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(s.Endpoints, tt.endpoints) || s.CACert != tt.cacert {
				t.Fatalf("endpoints %q cacert %q, want %q %q", s.Endpoints, s.CACert, tt.endpoints, tt.cacert)
			}
			if s.Cluster != "external" && (s.Cert != "" || s.Key != "") {
				t.Fatalf("cert %q key %q taken from the environment for --cluster %s", s.Cert, s.Key, s.Cluster)
			}
		})
	}
}
