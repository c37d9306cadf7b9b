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

// startCluster starts the members of an embedded or docker cluster; prepare has connected an external one.
func (r *run) startCluster(ctx context.Context) error {
	var err error
	switch r.s.Cluster {
	case "embed":
		err = r.startEmbedded(ctx)
	case "docker":
		err = r.startDocker(ctx)
	}
	if err != nil || !r.s.Auth {
		return err
	}
	if _, err := clusters.EnableAuth(ctx, r.cluster); err != nil {
		return err
	}
	fmt.Fprintf(r.out, "auth enabled: the load runs as %s, faults and checks as root\n", clusters.LoadUser)
	return nil
}

// startEmbedded starts the embedded cluster of the scenario, with what its fault schedule needs.
func (r *run) startEmbedded(ctx context.Context) error {
	opts := clusters.EmbedOptions{
		Members: r.s.Members, Dir: r.dir, EtcdFlags: r.etcdFlags, TLS: r.s.TLS,
		Command: r.env.MemberCommand, MemberCommands: r.embedCommands(), Log: r.out, OnExit: r.memberExited,
		Failpoints: r.s.Failpoints,
	}
	r.faults.configure(&opts, r.s.Seed)
	embedded, err := clusters.StartEmbedded(ctx, opts)
	if err != nil {
		return err
	}
	r.cluster = embedded
	return nil
}

// startDocker starts the docker cluster of the scenario.
func (r *run) startDocker(ctx context.Context) error {
	memory, err := r.s.memberMemory()
	if err != nil {
		return err
	}
	opts := clusters.DockerOptions{
		Members: r.s.Members, Dir: r.dir, Images: r.images, EtcdFlags: r.etcdFlags, TLS: r.s.TLS,
		CPUs: r.s.MemberCPUs, Memory: memory, Log: r.out, OnExit: r.memberExited,
	}
	r.faults.configureDocker(&opts, r.s.Seed, r.moreImages)
	c, err := clusters.StartDocker(ctx, opts)
	if err != nil {
		return err
	}
	r.cluster = c
	return nil
}

// connectExternal connects to the scenario's external cluster.
func (r *run) connectExternal(ctx context.Context) error {
	external, err := r.s.connectExternal(ctx)
	if err != nil {
		return err
	}
	r.cluster = external
	return nil
}

// connectExternal connects to the scenario's external cluster, logged in as --user: an endpoint that does
// not answer, or credentials it refuses, are usage errors (nothing was started).
func (s *Scenario) connectExternal(ctx context.Context) (*clusters.External, error) {
	user, err := s.externalUser()
	if err != nil {
		return nil, err
	}
	return clusters.ConnectExternal(ctx, clusters.ExternalOptions{
		Endpoints: s.Endpoints, CACert: s.CACert, Cert: s.Cert, Key: s.Key, User: user,
	})
}

// embedCommands returns the member commands of an embedded cluster running built releases (nil for the
// linked etcd: the members re-execute chaosbench).
func (r *run) embedCommands() [][]string {
	return memberCommands(r.images, r.s.Members, r.env.MemberCommand)
}

// memberCommands returns each member's command when the members run images: a release's own binary, or
// the builtin etcd's, re-executed in member mode. `chaosbench cluster` starts its members with them too.
func memberCommands(images []clusters.EtcdImage, members int, memberCommand []string) [][]string {
	if images == nil {
		return nil
	}
	cmds := make([][]string, members)
	for i := range cmds {
		img := images[0]
		if len(images) > 1 {
			img = images[i]
		}
		switch {
		case !img.Builtin:
			cmds[i] = []string{img.Binary}
		case memberCommand != nil:
			cmds[i] = memberCommand
		default:
			cmds[i] = []string{img.Binary, clusters.MemberCommand}
		}
	}
	return cmds
}

// memberExited notes an exit nobody asked for (a crash) among the summary's crashes, with the last lines of
// the member's log: etcd failing, an outcome of its own.
func (r *run) memberExited(ev clusters.ExitEvent) {
	if ev.Expected {
		return
	}
	c := results.Crash{Member: ev.Member, PID: ev.PID, Time: ev.Time, Status: ev.Status, Log: ev.Log,
		LogTail: results.LogTail(ev.Log, results.CrashLogLines)}
	if r.dir != "" {
		if rel, err := filepath.Rel(r.dir, ev.Log); err == nil && !strings.HasPrefix(rel, "..") {
			c.Log = rel
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.crashes = append(r.crashes, c)
}

// serverVersion asks the first reachable endpoint for etcd's version.
func (r *run) serverVersion(ctx context.Context) string {
	for _, ep := range r.cluster.Endpoints() {
		sctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		st, err := r.runner.Conns()[0].Status(sctx, ep)
		cancel()
		if err == nil {
			return st.Version
		}
	}
	return ""
}

// describeMembers adds what the members ran to the summary's cluster section.
func (r *run) describeMembers(info *results.ClusterInfo) {
	if r.images != nil {
		for i := range info.Members {
			img := r.images[0]
			if len(r.images) > 1 {
				img = r.images[i]
			}
			info.EtcdVersions = append(info.EtcdVersions, img.Label())
		}
	}
	if r.s.Cluster == "docker" {
		info.MemberCPUs = r.s.MemberCPUs
		info.MemberMemoryBytes, _ = r.s.memberMemory()
	}
}

// removeData deletes the members' data directories of a successful run; their logs stay.
func (r *run) removeData() {
	for _, p := range clusters.Processes(r.cluster) {
		os.RemoveAll(p.DataDir())
	}
}

func joinEndpoints(eps []string) string {
	if len(eps) <= 3 {
		return fmt.Sprint(eps)
	}
	return fmt.Sprintf("%v and %d more", eps[:3], len(eps)-3)
}
