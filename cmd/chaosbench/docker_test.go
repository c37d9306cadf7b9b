package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/internal/testenv"
	"github.com/etcd-chaosbench/chaosbench/outcome"

	"github.com/moby/moby/client"

	"github.com/etcd-chaosbench/chaosbench"
	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// TestDockerBadInput: bad versions and container settings get one clear line and exit code 2, and start
// nothing. None of these needs Docker or a build.
func TestDockerBadInput(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"docker members", []string{"run", "--cluster", "docker", "--members", "4"}, "1, 3 or 5 members"},
		{"old release", []string{"run", "--etcd-version", "v3.3.0"}, "3.4.13 and 3.5 or later"},
		{"unserved 3.4", []string{"run", "--etcd-version", "v3.4.12"}, "the only 3.4 release"},
		{"not a version", []string{"run", "--etcd-version", "latest"}, `etcd version "latest"`},
		{"versions per member", []string{"run", "--etcd-version", "v3.5.35,v3.6.16"}, "2 versions for 3 members"},
		{"cpus without docker", []string{"run", "--member-cpus", "1"}, "are for --cluster docker"},
		{"tiny cpus", []string{"run", "--cluster", "docker", "--member-cpus", "0.001"}, "at least 0.01 cores"},
		{"memory", []string{"run", "--cluster", "docker", "--member-memory", "lots"}, `--member-memory "lots"`},
		{"version of external", []string{"run", "--cluster", "external", "--endpoints", "http://127.0.0.1:1", "--etcd-version", "v3.5.35"}, "for clusters chaosbench starts"},
		{"compare one variant", []string{"compare", "--etcd-version", "v3.6.16"}, "two variants or more"},
		{"compare rounds", []string{"compare", "--etcd-version", "v3.5.35,v3.6.16", "--rounds", "-1"}, "--rounds -1"},
		{"compare cooldown", []string{"compare", "--etcd-version", "v3.5.35,v3.6.16", "--cooldown", "-1s"}, "--cooldown -1s"},
		{"compare min effect", []string{"compare", "--etcd-version", "v3.5.35,v3.6.16", "--min-effect", "-5"}, "--min-effect -5%"},
		{"compare bad variant", []string{"compare", "--etcd-version", "v3.5.35,v2.3.7"}, "v2.3.7"},
		{"image version", []string{"image", "build", "--etcd-version", "v3.2.0"}, "3.4.13 and 3.5 or later"},
		{"serve external", []string{"cluster", "--cluster", "external"}, "starts embed or docker clusters"},
		{"serve versions", []string{"cluster", "--cluster", "docker", "--etcd-version", "v3.5.35,v3.6.16"}, "2 versions for 3 members"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(dir, "out-"+strings.ReplaceAll(tt.name, " ", "-"))
			args := append([]string{}, tt.args...)
			if args[0] == "run" || args[0] == "compare" || args[0] == "cluster" {
				args = append(args, "--out", out)
			}
			var stdout, stderr bytes.Buffer
			code := execute(args, &stdout, &stderr)
			if code != outcome.ExitUsage {
				t.Fatalf("exit code %d, want %d; stderr: %s", code, outcome.ExitUsage, stderr.String())
			}
			lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tt.want) {
				t.Fatalf("stderr %q, want one line containing %q", stderr.String(), tt.want)
			}
			if _, err := os.Stat(out); err == nil {
				t.Fatalf("output directory %s was created", out)
			}
		})
	}
}

// requireDocker skips the test where no Docker engine answers (CI machines have one).
func requireDocker(t *testing.T) *client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := clusters.DockerClient(ctx)
	if err != nil {
		testenv.Missing(t, testenv.Docker, "skipping: container tests need a Docker engine, and none answers here: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d.Client
}

// labelled counts the containers and networks labelled with run directory dir.
func labelled(t *testing.T, d *client.Client, dir string) (containers, networks []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	abs, _ := filepath.Abs(dir)
	filter := make(client.Filters).Add("label", clusters.LabelRun+"="+abs)
	cs, err := d.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: filter})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := d.NetworkList(ctx, client.NetworkListOptions{Filters: filter})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cs.Items {
		containers = append(containers, strings.TrimPrefix(c.Names[0], "/"))
	}
	for _, n := range ns.Items {
		networks = append(networks, n.Name)
	}
	return containers, networks
}

// TestLongDockerCompareVersions compares a 3.5 and a 3.6 release on docker clusters: both serve the same
// seeded txn-mixed load, each reports its own server version, and the side-by-side table is written. A
// long test (make test-long): make test compares on embedded clusters (TestCompareRounds) and runs 3.5 and
// 3.6 containers, alone and mixed (clusters' TestDockerKillAndRestart, TestDockerMixedVersions).
func TestLongDockerCompareVersions(t *testing.T) {
	testenv.Long(t, "two 3-member container clusters, one per release, one after the other")
	d := requireDocker(t)
	out := filepath.Join(t.TempDir(), "cmp")
	cmd := exec.Command(binary, "compare", "--cluster", "docker", "--etcd-version", "v3.5.35,v3.6.16",
		"--workload", "txn-mixed", "--rate", "200", "--duration", "3s", "--rounds", "1", "--out", out, "--progress", "none")
	output, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("chaosbench compare: %v\n%s", err, output)
	}
	md, err := os.ReadFile(filepath.Join(out, chaosbench.ComparisonMarkdown))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| v3.5.35 | v3.6.16 | Δ v3.6.16 |", "#### v3.6.16 against v3.5.35 (baseline)", "| txn-read:p99 |", "| txn-write:p50 |", "| total:throughput |"} {
		if !bytes.Contains(md, []byte(want)) {
			t.Errorf("compare.md lacks %q:\n%s", want, md)
		}
	}
	var seed int64
	for _, v := range []struct{ dir, server string }{{"01-v3.5.35", "3.5.35"}, {"02-v3.6.16", "3.6.16"}} {
		s, err := results.ReadSummary(filepath.Join(out, v.dir))
		if err != nil {
			t.Fatal(err)
		}
		if s.Versions.EtcdServer != v.server || s.Cluster.Backend != "docker" {
			t.Errorf("%s: ran etcd %q on %q", v.dir, s.Versions.EtcdServer, s.Cluster.Backend)
		}
		if s.Incomplete || s.Total.Count == 0 || s.Total.Errors != 0 {
			t.Errorf("%s: incomplete %v, %d operations, %d errors", v.dir, s.Incomplete, s.Total.Count, s.Total.Errors)
		}
		if seed != 0 && s.Seed != seed {
			t.Errorf("variants ran with different seeds: %d, %d", seed, s.Seed)
		}
		seed = s.Seed
		if cs, ns := labelled(t, d, filepath.Join(out, v.dir)); len(cs)+len(ns) > 0 {
			t.Errorf("%s left containers %v and networks %v", v.dir, cs, ns)
		}
		if logs, _ := filepath.Glob(filepath.Join(out, v.dir, "members", "m*.log")); len(logs) != 3 {
			t.Errorf("%s: member logs %v", v.dir, logs)
		}
	}
	// The effects table: every figure of the second variant against the first, with a verdict.
	for _, want := range []string{"against v3.5.35 (baseline)", "txn-write:p99", "verdict"} {
		if !bytes.Contains(output, []byte(want)) {
			t.Errorf("the effects table was not printed (no %q):\n%s", want, output)
		}
	}
}

// TestDockerKill9LeavesNoContainer: SIGKILL of chaosbench mid-run; its watchdog removes the containers
// and the network. The cluster runs the builtin image: the static chaosbench binary in member mode.
func TestDockerKill9LeavesNoContainer(t *testing.T) {
	t.Parallel() // judges outcomes and files, not latency (see TestMain)
	d := requireDocker(t)
	// The builtin image is built first, on its own, so that the wait below covers the cluster's start only.
	if code, log := runBinary(t, "image", "build", "--etcd-version", "builtin"); code != 0 {
		t.Fatalf("image build builtin: exit code %d\n%s", code, log)
	}
	out := filepath.Join(t.TempDir(), "run")
	cmd := exec.Command(binary, "run", "--cluster", "docker", "--workload", "put", "--duration", "60s", "--out", out, "--progress", "none")
	waitForLine(t, cmd, "cluster ready")
	if cs, ns := labelled(t, d, out); len(cs) != 3 || len(ns) != 1 {
		t.Fatalf("running cluster has containers %v, networks %v", cs, ns)
	}
	time.Sleep(time.Second) // well into the load
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	waitUntil(t, 15*time.Second, func() bool {
		cs, ns := labelled(t, d, out)
		return len(cs)+len(ns) == 0
	})
	s, err := results.ReadSummary(out)
	if err == nil {
		t.Errorf("a killed run wrote a summary: %+v", s)
	}
}

// TestDockerCleanAfterCrash: when chaosbench and its watchdog both die, `chaosbench clean` finds the
// orphans by label, removes them and says what it removed; a second clean has nothing to do.
func TestDockerCleanAfterCrash(t *testing.T) {
	// Not in parallel: every docker run starts by removing the orphans of dead chaosbench processes, and
	// one starting beside this test would take the orphans this test leaves for clean to find.
	d := requireDocker(t)
	out := filepath.Join(t.TempDir(), "run")
	cmd := exec.Command(binary, "run", "--cluster", "docker", "--etcd-version", "v3.6.16", "--members", "1",
		"--workload", "put", "--duration", "60s", "--out", out, "--progress", "none")
	waitForLine(t, cmd, "cluster ready")
	var reaper int
	for _, pid := range children(cmd.Process.Pid) {
		if cmdline, _ := os.ReadFile(filepath.Join("/proc", pid, "cmdline")); bytes.Contains(cmdline, []byte(clusters.ReaperCommand)) {
			reaper = atoi(pid)
		}
	}
	if reaper == 0 {
		t.Fatal("no docker-reaper watches the run")
	}
	syscall.Kill(reaper, syscall.SIGKILL)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	time.Sleep(500 * time.Millisecond)
	containers, networks := labelled(t, d, out)
	if len(containers) != 1 || len(networks) != 1 {
		t.Fatalf("after the crash: containers %v, networks %v; want the orphans", containers, networks)
	}
	var stdout, stderr bytes.Buffer
	if code := execute([]string{"clean"}, &stdout, &stderr); code != 0 {
		t.Fatalf("clean: exit %d: %s", code, stderr.String())
	}
	for _, name := range append(containers, networks...) {
		if !strings.Contains(stdout.String(), name) {
			t.Errorf("clean does not say it removed %s:\n%s", name, stdout.String())
		}
	}
	if cs, ns := labelled(t, d, out); len(cs)+len(ns) > 0 {
		t.Fatalf("clean left containers %v, networks %v", cs, ns)
	}
	stdout.Reset()
	if code := execute([]string{"clean"}, &stdout, &stderr); code != 0 || strings.Contains(stdout.String(), filepath.Base(containers[0])) {
		t.Fatalf("second clean: exit %d: %s", code, stdout.String())
	}
}

// TestDockerInterrupt: SIGINT of a docker run stops the load, writes partial results, removes the
// containers and network, and exits with 130 within 10 s.
func TestDockerInterrupt(t *testing.T) {
	t.Parallel() // judges outcomes and files, not latency (see TestMain)
	d := requireDocker(t)
	out := filepath.Join(t.TempDir(), "run")
	cmd := exec.Command(binary, "run", "--cluster", "docker", "--etcd-version", "v3.6.16", "--workload", "put",
		"--duration", "60s", "--out", out, "--progress", "lines")
	waitForLine(t, cmd, "elapsed")
	sent := time.Now()
	cmd.Process.Signal(os.Interrupt)
	cmd.Wait()
	if took := time.Since(sent); took > 10*time.Second {
		t.Errorf("exiting took %v after SIGINT", took)
	}
	if code := cmd.ProcessState.ExitCode(); code != outcome.ExitInterrupted {
		t.Fatalf("exit code %d, want %d", code, outcome.ExitInterrupted)
	}
	s, err := results.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Incomplete || s.Operations["put"] == nil || s.Operations["put"].Count == 0 {
		t.Fatalf("partial summary: incomplete=%v ops=%v", s.Incomplete, s.Operations)
	}
	if cs, ns := labelled(t, d, out); len(cs)+len(ns) > 0 {
		t.Fatalf("interrupted run left containers %v, networks %v", cs, ns)
	}
}

// TestEmbedVersion: --cluster embed --etcd-version runs built releases as the member processes, one per
// member when given per member.
func TestEmbedVersion(t *testing.T) {
	t.Parallel() // judges outcomes and files, not latency (see TestMain)
	out := filepath.Join(t.TempDir(), "run")
	cmd := exec.Command(binary, "run", "--cluster", "embed", "--etcd-version", "v3.5.35,v3.5.35,v3.6.16",
		"--workload", "put", "--rate", "200", "--duration", "2s", "--out", out, "--progress", "none")
	if output, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("chaosbench run: %v\n%s", err, output)
	}
	s, err := results.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(s.Cluster.EtcdVersions, ","); got != "v3.5.35,v3.5.35,v3.6.16" || s.Total.Count == 0 || s.Total.Errors != 0 {
		t.Fatalf("versions %s, %d operations, %d errors", got, s.Total.Count, s.Total.Errors)
	}
	for i, want := range []string{"3.5.35", "3.5.35", "3.6.16"} {
		// Each member logs the release it runs as it starts.
		log, err := os.ReadFile(filepath.Join(out, "members", "m"+string(rune('1'+i))+".log"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(log), `"etcd-version":"`+want+`"`) {
			t.Errorf("m%d did not run etcd %s", i+1, want)
		}
	}
}
