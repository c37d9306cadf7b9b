package workloads

import (
	"context"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-chaosbench/chaosbench/clusters"
)

func TestMain(m *testing.M) {
	clusters.RunMemberIfRequested()
	os.Exit(m.Run())
}

// startCluster starts an embedded cluster of n members for one test or benchmark.
func startCluster(tb testing.TB, n int, flags ...string) *clusters.Embedded {
	tb.Helper()
	ef, err := clusters.ParseEtcdFlags(flags)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := clusters.StartEmbedded(ctx, clusters.EmbedOptions{Members: n, Dir: tb.TempDir(), EtcdFlags: ef})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close(context.Background()) })
	return c
}

func clientConfig(c clusters.Cluster) clientv3.Config {
	cfg := clusters.ClientConfig(c)
	cfg.Logger = zap.NewNop()
	return cfg
}
