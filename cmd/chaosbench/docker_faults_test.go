package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters/slowfs"
	"github.com/etcd-chaosbench/chaosbench/faults"
	"github.com/etcd-chaosbench/chaosbench/internal/testenv"
	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// dockerFaultsWorkload is the load of the container fault tests: kube-apiserver's traffic for a small
// cluster (dockerFaultsNodes nodes), whose heartbeats and pod churn write several times a second, so that
// every fault shows in the write gap and the history has transactions, leases, lists and watches to check.
const (
	dockerFaultsWorkload = "kube"
	dockerFaultsNodes    = "30"
)

// TestLongDockerFaultsMixedUpgrade: a mixed-version container cluster (two 3.5 members, one 3.6) serves a
// load through a leader kill, a leader partition, a paused follower, delayed and reset peer links and a
// slowed disk, and then a rolling upgrade of the 3.5 members to 3.6; every window recovers, the history
// checks clean, every member runs 3.6 at the end, and nothing is left behind.
func TestLongDockerFaultsMixedUpgrade(t *testing.T) {
	testenv.Long(t, "48 s of load on a mixed-version container cluster, six faults and a rolling upgrade")
	d := requireDocker(t)
	specs := []string{
		"kill:leader@2s+2s",
		"partition:leader@6s+3s",
		"pause:follower@11s+1s",
		"delay:leader=20ms@13s+1s",
		"reset:leader@15s",
	}
	switch {
	case dockerSlowFS():
		specs = append(specs, "slowdisk:follower=20ms~5ms@16s+1s")
	case faults.StraceAvailable() == nil:
		specs = append(specs, "slowdisk:follower=20ms@16s+1s")
	}
	// The roll-out gets the rest of the load (it ends with it): 4-10 s here, up to 18 s on a busy machine.
	specs = append(specs, "upgrade=v3.6.16@18s")
	out := runDockerFaults(t, "v3.5.35,v3.5.35,v3.6.16", 48*time.Second, specs)
	s := checkDockerFaults(t, out, len(specs))
	for _, w := range s.Faults {
		if w.Fault == faults.KindPartition && w.Availability.TimeToLeaderMs == nil {
			t.Errorf("the partitioned leader kept office: %+v", w)
		}
	}
	for i := range 3 {
		if v := lastEtcdVersion(t, out, i+1); v != "3.6.16" {
			t.Errorf("m%d runs etcd %s after the upgrade", i+1, v)
		}
	}
	if fi, err := os.Stat(filepath.Join(out, "members", "m1.proxy.log")); err != nil || fi.Size() == 0 {
		t.Errorf("peer traffic did not go through the proxies: %v", err)
	}
	if cs, ns := labelled(t, d, out); len(cs)+len(ns) > 0 {
		t.Errorf("left containers %v and networks %v", cs, ns)
	}
}

// TestLongDockerFaultsDowngrade: a 3.6 container cluster goes through a leader kill (losing its unsynced
// writes, where slowfs works) and a refusing leader partition, then a rolling downgrade to 3.5 under load (etcd's downgrade enable first); every window
// recovers, the history checks clean, every member runs 3.5 at the end, and nothing is left behind.
func TestLongDockerFaultsDowngrade(t *testing.T) {
	testenv.Long(t, "46 s of load on a container cluster, three faults and a rolling downgrade across releases")
	d := requireDocker(t)
	kill := "kill:leader@2s+2s"
	if dockerSlowFS() {
		kill = "kill:leader=drop-unsynced@2s+2s" // a power loss: the member restarts on what its disk synced
	}
	specs := []string{kill, "partition:leader=refuse@6s+2s", "downgrade=v3.5.35@10s"}
	// A rolling downgrade restarts every member after three faults in 12 s with a 1 s settle: the steady phase
	// between them is short, and a few requests of it fail (10 of 200 seen here). The default 5% is a bar for
	// ordinary runs; this test is about the downgrade happening.
	out := runDockerFaults(t, "v3.6.16", 46*time.Second, specs, "--threshold", "requests:errors_outside_faults<15%")
	checkDockerFaults(t, out, len(specs))
	for i := range 3 {
		if v := lastEtcdVersion(t, out, i+1); v != "3.5.35" {
			t.Errorf("m%d runs etcd %s after the downgrade", i+1, v)
		}
	}
	if cs, ns := labelled(t, d, out); len(cs)+len(ns) > 0 {
		t.Errorf("left containers %v and networks %v", cs, ns)
	}
}

// dockerSlowFS reports whether disk faults on containers use slowfs here (FUSE, and root: see
// clusters/docker_disk.go) rather than strace.
func dockerSlowFS() bool { return slowfs.Available() == nil && os.Getuid() == 0 }

// runDockerFaults runs the fault workload on a 3-member docker cluster of the given versions with the
// given schedule (history and checks on, as by default) and returns the run directory.
func runDockerFaults(t *testing.T, versions string, duration time.Duration, specs []string, extra ...string) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "run")
	start := time.Now()
	cmd := exec.Command(binary, "run", "--cluster", "docker", "--etcd-version", versions,
		"--workload", dockerFaultsWorkload, "--nodes", dockerFaultsNodes, "--duration", duration.String(),
		"--etcd-flag", "heartbeat-interval=50", "--etcd-flag", "election-timeout=500", "--fault-settle", "1s",
		"--faults", strings.Join(specs, ","), "--out", out, "--progress", "none")
	cmd.Args = append(cmd.Args, extra...)
	output, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("chaosbench run: %v\n%s", err, output)
	}
	t.Logf("ran %s under %d faults in %v", versions, len(specs), time.Since(start).Round(100*time.Millisecond))
	for _, line := range strings.Split(string(output), "\n") {
		if strings.HasPrefix(line, "fault ") && (strings.Contains(line, "moved") || strings.Contains(line, "enabled")) {
			t.Log(line)
		}
	}
	return out
}

// checkDockerFaults checks the run's summary: every window recovered, the checks passed, no errors
// beyond the faults', no mount under the run directory.
func checkDockerFaults(t *testing.T, out string, windows int) *results.Summary {
	t.Helper()
	s, err := results.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	if s.Incomplete || s.Total.Count == 0 || s.Cluster.Backend != "docker" {
		t.Fatalf("incomplete %v, %d operations on %q", s.Incomplete, s.Total.Count, s.Cluster.Backend)
	}
	if len(s.Faults) != windows {
		t.Fatalf("%d windows, want %d: %+v", len(s.Faults), windows, s.Faults)
	}
	for _, w := range s.Faults {
		if w.Outcome != faults.OutcomeRecovered || w.Availability == nil {
			t.Errorf("window %s: %s", w.Spec, w.Outcome)
			continue
		}
		t.Logf("%-32s targets %v, write gap %.0f ms", w.Spec, w.Targets, w.Availability.WriteGapMs)
	}
	requireChecks(t, s.Checks, kubeChecks) // dockerFaultsWorkload
	if mounts := mountsUnder(t, out); len(mounts) > 0 {
		t.Errorf("mounts remain: %v", mounts)
	}
	return s
}

var etcdVersionField = regexp.MustCompile(`"etcd-version":"([^"]+)"`)

// lastEtcdVersion returns the release member mN said it runs when it last started (from its log).
func lastEtcdVersion(t *testing.T, out string, n int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(out, "members", "m"+string(rune('0'+n))+".log"))
	if err != nil {
		t.Fatal(err)
	}
	all := etcdVersionField.FindAllSubmatch(b, -1)
	if len(all) == 0 {
		return ""
	}
	return string(all[len(all)-1][1])
}

// TestDockerFailpoints: failpoint builds run as containers too. The leader panics after saving its WAL
// and its container is started again on its data; a follower's backend commits stall; both are reported
// with what happened, the cluster recovers and the checks pass. The follower's failpoint starts well after
// the leader's window: the panicked member's container is started again when that window heals (6 s, and
// up to 2 s more on a slow machine), and a follower chosen while it is still starting cannot be armed,
// which the run rightly reports as a fault that did not happen.
func TestDockerFailpoints(t *testing.T) {
	t.Parallel() // judges outcomes and files, not latency (see TestMain)
	requireDocker(t)
	needFailpointBuild(t)
	out := filepath.Join(t.TempDir(), "run")
	b, err := exec.Command(binary, "run", "--cluster", "docker", "--etcd-version", "v3.6.16", "--failpoints",
		"--members", "3", "--workload", "put", "--rate", "200", "--duration", "12s", "--out", out, "--progress", "none",
		"--faults", "failpoint:leader=raftAfterSave:panic@3s+3s,failpoint:follower=beforeCommit:sleep(100ms)@9s+2s").CombinedOutput()
	output := string(b)
	if err != nil {
		t.Fatalf("chaosbench run: %v\n%s", err, output)
	}
	for _, want := range []string{"panicked at raftAfterSave", "beforeCommit fired"} {
		if !strings.Contains(output, want) {
			t.Errorf("output lacks %q:\n%s", want, output)
		}
	}
	s, err := results.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	if s.Outcome != outcome.OK || len(s.Faults) != 2 {
		t.Fatalf("outcome %s %v, %d windows:\n%s", s.Outcome, s.Reasons, len(s.Faults), output)
	}
	requireChecks(t, s.Checks, map[string]string{"linearizability": results.VerdictOK, "members-agree": results.VerdictOK,
		"watch": results.VerdictNothing, "serializable-reads": results.VerdictNothing})
}
