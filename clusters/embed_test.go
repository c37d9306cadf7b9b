package clusters

import (
	"context"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) {
	RunMemberIfRequested()
	os.Exit(m.Run())
}

func startCluster(t *testing.T, members int, flags ...string) *Embedded {
	t.Helper()
	ef, err := ParseEtcdFlags(flags)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := StartEmbedded(ctx, EmbedOptions{Members: members, Dir: t.TempDir(), EtcdFlags: ef})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return c
}

func newClient(t *testing.T, c Cluster) *clientv3.Client {
	t.Helper()
	cfg := ClientConfig(c)
	cfg.Logger = zap.NewNop()
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func TestEmbeddedKillLeaderRecovers(t *testing.T) {
	c := startCluster(t, 3, "heartbeat-interval=50", "election-timeout=500")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("leader %s", leader.Name())
	p := leader.(Process)
	if err := p.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if p.Running() {
		t.Fatal("killed member still running")
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatalf("two members left should elect a leader: %v", err)
	}
	newLeader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if newLeader.Name() == leader.Name() {
		t.Fatalf("leader %s was killed but is still named leader", leader.Name())
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatalf("restarted member should rejoin: %v", err)
	}
	cli := newClient(t, c)
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
}
