package workloads

import (
	"context"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// BenchmarkPutOverhead compares a put from etcd's client as etcd's benchmark tool configures it
// (etcd-client), the same with the runner's connection options (runner-conn: etcd's generated codec,
// fixed flow-control windows), the same over the runner's unary connection (unary-conn), and the same
// put sent through the recording Client over the unary connection as the runner sends it (history file,
// HDR collector, per-request timeout), and over gRPC's connection with and without the stats handler that
// records attempts, against a real single-member cluster. The differences in allocs/op and B/op are what
// the options save and what chaosbench's recording costs.
func BenchmarkPutOverhead(b *testing.B) {
	c := startCluster(b, 1)
	plain, err := clientv3.New(clientConfig(c))
	if err != nil {
		b.Fatal(err)
	}
	defer plain.Close()
	cfg := clientConfig(c)
	cfg.DialOptions = dialOptions(false)
	cli, err := clientv3.New(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer cli.Close()
	ctx := context.Background()
	val := string(history.EncodeValue(history.Value{ID: 1, Size: 256}, []byte("x")))

	eps, _ := parseUnaryEndpoints(cfg.Endpoints, false)
	unary := newUnaryConn(ctx, cli.ActiveConnection(), eps, nil, 0)
	defer unary.Close()
	lean := clientv3.NewKVFromKVClient(unaryKV{unary}, cli)

	for _, v := range []struct {
		name string
		conn clientv3.KV
	}{{"etcd-client", plain}, {"runner-conn", cli}, {"unary-conn", lean}} {
		conn := v.conn
		b.Run(v.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := conn.Do(ctx, clientv3.OpPut("/bench/0000270f", val)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	// The recording client over gRPC's connection, as the kube workload sends, with and without the stats
	// handler that records every attempt (attempts.go): what recording attempts costs.
	acfg := clientConfig(c)
	acfg.DialOptions = append(dialOptions(false), AttemptDialOption())
	watched, err := clientv3.New(acfg)
	if err != nil {
		b.Fatal(err)
	}
	defer watched.Close()
	for _, v := range []struct {
		name string
		conn *clientv3.Client
		kv   clientv3.KV
	}{{"recording-client", cli, lean}, {"recording-client-grpc", cli, cli.KV}, {"recording-client-grpc-attempts", watched, watched.KV}} {
		b.Run(v.name, func(b *testing.B) {
			dir := b.TempDir()
			hist, err := history.NewWriter(dir)
			if err != nil {
				b.Fatal(err)
			}
			defer hist.Close()
			col, err := results.NewCollector(results.CollectorOptions{Dir: dir})
			if err != nil {
				b.Fatal(err)
			}
			defer col.Close(0)
			rec := NewRecorder(time.Now(), hist, []byte("x"), col)
			rec.Begin()
			client := NewClient(0, v.conn, rec, ClientOptions{Timeout: 10 * time.Second})
			client.kv = v.kv
			b.ReportAllocs()
			for b.Loop() {
				req := history.Request{Kind: history.KindPut, Put: &history.Put{Key: "/bench/0000270f", Value: client.NewValue(256)}}
				if _, err := client.Do(ctx, nil, "put", req); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
