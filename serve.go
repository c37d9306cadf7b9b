package chaosbench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// EndpointsFile is written into the directory of a served cluster: its client URLs, one per line.
const EndpointsFile = "endpoints"

// Serve starts the embedded or docker cluster that s describes, writes its endpoints to DIR/endpoints and prints
// them, and keeps it running until ctx is done; then it stops the members. It is `chaosbench cluster`:
// a cluster to point etcdctl, etcd's benchmark or another chaosbench run (--cluster external) at.
func Serve(ctx context.Context, s Scenario, env Env) error {
	if s.Cluster != "embed" && s.Cluster != "docker" {
		return outcome.Usagef("--cluster %q: chaosbench cluster starts embed or docker clusters", s.Cluster)
	}
	if s.Members != 1 && s.Members != 3 && s.Members != 5 {
		return outcome.Usagef("--members %d: a cluster has 1, 3 or 5 members", s.Members)
	}
	if err := s.validateVersions(); err != nil {
		return err
	}
	if s.Name == "" {
		s.Name = "cluster"
	}
	etcdFlags, images, err := s.resolveMembers(ctx, env.Out)
	if err != nil {
		return err
	}
	dir := s.OutDir(time.Now())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return outcome.Usagef("--out %s: %v", dir, err)
	}
	c, err := startServed(ctx, s, dir, etcdFlags, images, env)
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

// servedCluster is a cluster `chaosbench cluster` serves.
type servedCluster interface {
	clusters.Cluster
	ClientTLSFiles() (clusters.TLSFiles, bool)
}

// startServed starts the cluster of `chaosbench cluster`.
func startServed(ctx context.Context, s Scenario, dir string, etcdFlags []clusters.EtcdFlag, images []clusters.EtcdImage, env Env) (servedCluster, error) {
	if s.Cluster == "docker" {
		memory, err := s.memberMemory()
		if err != nil {
			return nil, err
		}
		return clusters.StartDocker(ctx, clusters.DockerOptions{
			Members: s.Members, Dir: dir, Images: images, EtcdFlags: etcdFlags, TLS: s.TLS,
			CPUs: s.MemberCPUs, Memory: memory, Log: env.Out,
		})
	}
	return clusters.StartEmbedded(ctx, clusters.EmbedOptions{
		Members: s.Members, Dir: dir, EtcdFlags: etcdFlags, TLS: s.TLS, Command: env.MemberCommand,
		MemberCommands: memberCommands(images, s.Members, env.MemberCommand), Log: env.Out,
	})
}

// BindServeFlags defines the backend and version flags of `chaosbench cluster`.
func BindServeFlags(fs *pflag.FlagSet, s *Scenario) {
	fs.StringVar(&s.Cluster, "cluster", s.Cluster, "backend: embed (member processes) or docker (member containers)")
	bindVersionFlags(fs, s)
}
