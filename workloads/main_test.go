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

// TestMain lets a test binary start as an etcd member process. The tests that judge behaviour (a fault's
// outcome, exact operation counts of an open-loop plan, answers) and no latency call t.Parallel: make test
// runs them three at a time (-parallel 3) once this package's sequential tests, which judge latency or hold
// timing bounds (a delay, a slow disk, a pause, a kill's restart time, an election), have run alone.
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
