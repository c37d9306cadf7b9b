package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// etcdctlEnv are the variables etcdctl reads and chaosbench reads as it does.
var etcdctlEnv = []string{"ETCDCTL_ENDPOINTS", "ETCDCTL_CACERT", "ETCDCTL_CERT", "ETCDCTL_KEY", "ETCDCTL_USER", "ETCDCTL_PASSWORD"}

// unsetEtcdctlEnv keeps a test that runs the command in this process from seeing the caller's etcdctl
// settings (an empty variable counts as unset).
func unsetEtcdctlEnv(t *testing.T) {
	t.Helper()
	for _, k := range etcdctlEnv {
		t.Setenv(k, "")
	}
}

// environWithout returns this process's environment without etcdctl's variables, plus extra.
func environWithout(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !slices.ContainsFunc(etcdctlEnv, func(k string) bool { return strings.HasPrefix(kv, k+"=") }) {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// TestRunExternal runs the binary against a member it did not start, named as etcdctl users name it: a
// bare host:port, by flag or by ETCDCTL_ENDPOINTS.
func TestRunExternal(t *testing.T) {
	t.Parallel() // judges outcomes and files, not latency (see TestMain)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	member, err := clusters.StartEmbedded(ctx, clusters.EmbedOptions{Members: 1, Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("start a member: %v", err)
	}
	t.Cleanup(func() { member.Close(context.Background()) })
	url := member.Endpoints()[0]
	hostPort := strings.TrimPrefix(url, "http://")

	for _, tt := range []struct {
		name string
		args []string
		env  []string
	}{
		{"--endpoints host:port", []string{"--endpoints", hostPort}, nil},
		{"ETCDCTL_ENDPOINTS", nil, []string{"ETCDCTL_ENDPOINTS=" + hostPort}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "run")
			args := append([]string{"run", "--cluster", "external", "--workload", "put", "--duration", "3s",
				"--rate", "200", "--clients", "4", "--conns", "1", "--progress", "none", "--out", out}, tt.args...)
			cmd := exec.Command(binary, args...)
			cmd.Env = environWithout(tt.env...)
			output, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("chaosbench %s: %v\n%s", strings.Join(args, " "), err, output)
			}
			s, err := results.ReadSummary(out)
			if err != nil {
				t.Fatal(err)
			}
			if s.Cluster.Backend != "external" || !slices.Equal(s.Cluster.Endpoints, []string{url}) {
				t.Fatalf("summary cluster %+v, want external at %s", s.Cluster, url)
			}
			if put := s.Operations["put"]; put == nil || put.Count == 0 {
				t.Fatalf("summary put: %+v", put)
			}
			if !slices.ContainsFunc(strings.Split(string(output), "\n"), func(line string) bool {
				return strings.HasPrefix(line, "cluster ready:") && strings.Contains(line, url)
			}) {
				t.Errorf("output does not name the endpoint %s:\n%s", url, output)
			}
		})
	}
}

// TestEtcdctlEnvironment: a bad ETCDCTL_ENDPOINTS is one line naming the variable, exit 2, nothing
// started; with a cluster chaosbench starts, the variables are ignored.
func TestEtcdctlEnvironment(t *testing.T) {
	t.Run("bad ETCDCTL_ENDPOINTS", func(t *testing.T) {
		unsetEtcdctlEnv(t)
		t.Setenv("ETCDCTL_ENDPOINTS", "127.0.0.1:2379,127.0.0.1:http")
		out := filepath.Join(t.TempDir(), "run")
		var stdout, stderr bytes.Buffer
		code := execute([]string{"run", "--cluster", "external", "--out", out}, &stdout, &stderr)
		want := `ETCDCTL_ENDPOINTS "127.0.0.1:http": port "http"`
		if code != outcome.ExitUsage || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), want) {
			t.Fatalf("exit %d, stderr %q; want %d and one line containing %q", code, stderr.String(), outcome.ExitUsage, want)
		}
		if _, err := os.Stat(out); err == nil || stdout.Len() != 0 {
			t.Fatalf("something was started: %q", stdout.String())
		}
	})
	t.Run("ignored for embed", func(t *testing.T) {
		unsetEtcdctlEnv(t)
		t.Setenv("ETCDCTL_ENDPOINTS", "not an endpoint")
		t.Setenv("ETCDCTL_CACERT", "/nonexistent/ca.pem")
		var stdout, stderr bytes.Buffer
		code := execute([]string{"run", "--workload", "put", "--dry-run"}, &stdout, &stderr)
		if code != outcome.ExitOK || !strings.Contains(stdout.String(), "embedded") {
			t.Fatalf("exit %d; stdout %q; stderr %q", code, stdout.String(), stderr.String())
		}
	})
}
