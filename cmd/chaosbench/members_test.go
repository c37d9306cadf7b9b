package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/storage/mvcc"
	"go.uber.org/zap"

	"github.com/etcd-chaosbench/chaosbench"
	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// TestDivergedMemberExits4: a follower of a 3-member cluster holds different data for one revision (its
// bbolt file was changed while it was stopped); a run against the cluster, as an external one, exits 4
// and its members-agree check names the member, the revision and both hashes.
func TestDivergedMemberExits4(t *testing.T) {
	t.Parallel() // judges outcomes and files, not latency (see TestMain)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, follower := startDivergedCluster(ctx, t)

	out := filepath.Join(t.TempDir(), "run")
	cmd := exec.CommandContext(ctx, binary, "run", "--cluster", "external", "--endpoints", strings.Join(c.Endpoints(), ","),
		"--workload", "put", "--duration", "2s", "--rate", "100", "--clients", "4", "--conns", "2", "--out", out, "--progress", "none")
	output, _ := cmd.CombinedOutput()
	if code := cmd.ProcessState.ExitCode(); code != outcome.ExitViolation {
		t.Fatalf("exit code %d, want %d\n%s", code, outcome.ExitViolation, output)
	}
	s, err := results.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	check := membersCheck(s)
	if check == nil || check.Verdict != results.VerdictViolation {
		t.Fatalf("members-agree: %+v\n%s", check, output)
	}
	first := strings.SplitN(check.Detail, "\n", 2)[0]
	for _, want := range []string{"after the load: members disagree at revision", follower.Name() + " has hash", "have hash"} {
		if !strings.Contains(first, want) {
			t.Errorf("detail %q lacks %q", first, want)
		}
	}
	if !strings.Contains(string(output), "members-agree        VIOLATION") {
		t.Errorf("the verdict was not printed:\n%s", output)
	}
	t.Log(first)
}

// startDivergedCluster starts a 3-member embedded cluster with etcd settings flags, writes 20 keys, and makes
// one follower diverge at one of their revisions (divergeRevision); it returns the healthy cluster and that
// follower. The cluster is stopped when the test ends.
func startDivergedCluster(ctx context.Context, t *testing.T, flags ...string) (*clusters.Embedded, clusters.Process) {
	t.Helper()
	etcdFlags, err := clusters.ParseEtcdFlags(flags)
	if err != nil {
		t.Fatal(err)
	}
	c, err := clusters.StartEmbedded(ctx, clusters.EmbedOptions{Members: 3, Dir: t.TempDir(), EtcdFlags: etcdFlags})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	cfg := clusters.ClientConfig(c)
	cfg.Logger = zap.NewNop()
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	var target int64
	for i := range 20 {
		resp, err := cli.Put(ctx, fmt.Sprintf("/before/%d", i), "v")
		if err != nil {
			t.Fatal(err)
		}
		if i == 5 {
			target = resp.Header.Revision
		}
	}
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var follower clusters.Process
	for _, p := range clusters.Processes(c) {
		if p.Name() != leader.Name() {
			follower = p
		}
	}
	if err := follower.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	divergeRevision(t, follower.DataDir(), target)
	if err := follower.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	return c, follower
}

// membersCheck returns the run's members-agree check, or nil.
func membersCheck(s *results.Summary) *results.Check {
	for i, c := range s.Checks {
		if c.Name == chaosbench.CheckMembersAgree {
			return &s.Checks[i]
		}
	}
	return nil
}

// divergeRevision changes the value stored for revision rev in the bbolt file of a stopped member's data
// directory, as a disk or a bug could: the member then holds different data than its peers for the same
// history, which nothing in etcd notices by default (the initial corruption check is off in etcd 3.6).
func divergeRevision(t *testing.T, dataDir string, rev int64) {
	t.Helper()
	db, err := bolt.Open(filepath.Join(dataDir, "member", "snap", "db"), 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		b := tx.Bucket([]byte("key"))
		if b == nil {
			return fmt.Errorf("no key bucket")
		}
		k := mvcc.RevToBytes(mvcc.Revision{Main: rev}, mvcc.NewRevBytes())
		var kv mvccpb.KeyValue
		if err := kv.Unmarshal(b.Get(k)); err != nil || kv.Key == nil {
			return fmt.Errorf("revision %d: %v", rev, err)
		}
		kv.Value = append([]byte("diverged "), kv.Value...)
		v, err := kv.Marshal()
		if err != nil {
			return err
		}
		return b.Put(k, v)
	})
	if err != nil {
		t.Fatalf("change revision %d in %s: %v", rev, dataDir, err)
	}
}

// TestMembersAgreeThroughKillsAndPartitions: a clean 3-member run through a follower kill and a leader
// partition finds the members agreeing after each window, with the load running, and after the load.
func TestMembersAgreeThroughKillsAndPartitions(t *testing.T) {
	t.Parallel() // judges outcomes and files, not latency (see TestMain)
	out := filepath.Join(t.TempDir(), "run")
	cmd := exec.Command(binary, "run", "--workload", "put", "--duration", "6s", "--rate", "200", "--clients", "16", "--conns", "4",
		"--etcd-flag", "heartbeat-interval=50", "--etcd-flag", "election-timeout=500", "--fault-settle", "1s",
		"--faults", "kill:follower@1s+1s,partition:leader@3s+1s", "--out", out, "--progress", "none")
	output, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("chaosbench run: %v\n%s", err, output)
	}
	s, err := results.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Faults) != 2 {
		t.Fatalf("faults %+v", s.Faults)
	}
	for _, w := range s.Faults {
		if w.Members == nil || w.Members.Verdict != results.VerdictOK {
			t.Errorf("members after %s: %+v", w.Spec, w.Members)
		}
	}
	check := membersCheck(s)
	if check == nil || check.Verdict != results.VerdictOK || !strings.Contains(check.Detail, "after each of the 2 fault windows too") {
		t.Fatalf("members-agree: %+v\n%s", check, output)
	}
	if !strings.Contains(string(output), "members-agree        OK") {
		t.Errorf("the verdict was not printed:\n%s", output)
	}
}
