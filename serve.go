package chaosbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// EndpointsFile is written into the directory of a served cluster: its client URLs, one per line.
const EndpointsFile = "endpoints"

// Serve starts the embedded cluster that s describes, writes its endpoints to DIR/endpoints and prints
// them, and keeps it running until ctx is done; then it stops the members. It is `chaosbench cluster`:
// a cluster to point etcdctl, etcd's benchmark or another chaosbench run (--cluster external) at.
func Serve(ctx context.Context, s Scenario, env Env) error {
	if s.Cluster != "embed" {
		return results.Usagef("chaosbench cluster serves embedded clusters only")
	}
	if s.Name == "" {
		s.Name = "cluster"
	}
	etcdFlags, err := clusters.ParseEtcdFlags(s.EtcdFlags)
	if err != nil {
		return err
	}
	dir := s.OutDir(time.Now())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return results.Usagef("--out %s: %v", dir, err)
	}
	c, err := clusters.StartEmbedded(ctx, clusters.EmbedOptions{
		Members: s.Members, Dir: dir, EtcdFlags: etcdFlags, TLS: s.TLS, Command: env.MemberCommand, Log: env.Out,
	})
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cleanupTimeout)
		defer cancel()
		c.Close(cctx)
	}()
	eps := strings.Join(c.Endpoints(), "\n") + "\n"
	if err := os.WriteFile(filepath.Join(dir, EndpointsFile), []byte(eps), 0o644); err != nil {
		return fmt.Errorf("write endpoints: %w", err)
	}
	fmt.Fprintf(env.Out, "cluster of %d ready in %s (interrupt to stop)\nendpoints: %s\n", s.Members, dir, strings.Join(c.Endpoints(), ","))
	if files, ok := c.ClientTLSFiles(); ok {
		fmt.Fprintf(env.Out, "client TLS: --cacert %s --cert %s --key %s\n", files.CA, files.Cert, files.Key)
	}
	<-ctx.Done()
	return nil
}
