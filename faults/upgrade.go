package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-chaosbench/chaosbench/clusters"
)

// Upgrade moves its targets to another etcd release one member at a time, under load, as an operator
// rolls a release through a cluster: followers first and the leader last (so that leadership moves once),
// each stopped gracefully and started from the new release's image on its own data directory, and the
// cluster healthy again before the next one goes. The window is the whole roll-out.
//
// etcd's rules decide what is possible. An upgrade needs nothing but adjacent minor versions: a 3.6 member
// joins a 3.5 cluster, and the cluster version moves to 3.6 once every member runs 3.6. A downgrade to an
// older minor is refused by the older members unless the cluster agreed to it, so a downgrade first asks
// for it (etcdctl downgrade enable, which 3.6 members answer) and waits until the cluster version is the
// target's; a downgrade within a minor version (v3.6.16 to v3.6.15) is a plain roll-out.
//
// Recover starts a target left stopped by an interrupted roll-out; a roll-out is never undone.
type Upgrade struct {
	base
	down bool
}

// memberMoveTimeout bounds the wait for the cluster's health after each member moved.
const memberMoveTimeout = 60 * time.Second

// Available needs a cluster whose members can change release (docker).
func (f *Upgrade) Available(c clusters.Cluster) error {
	if _, ok := c.(imager); !ok {
		return fmt.Errorf("moves members to another etcd release, which needs a docker cluster; a %s cluster cannot", c.Backend())
	}
	if _, err := processes(c); err != nil {
		return err
	}
	return nil
}

// Inject rolls the release through the targets.
func (f *Upgrade) Inject(ctx context.Context) error {
	im := f.env.Cluster.(imager)
	if err := f.resolve(ctx, f.env.Cluster.Members()); err != nil {
		return err
	}
	target := f.p.version
	var todo []clusters.Member
	for _, m := range f.targets {
		if im.MemberVersion(m.Name()) != target {
			todo = append(todo, m)
		}
	}
	if f.down && f.p.minor > 0 && slices.ContainsFunc(todo, func(m clusters.Member) bool { return f.minorOf(im, m) > f.p.minor }) {
		if err := f.enableDowngrade(ctx); err != nil {
			return err
		}
	}
	if !f.down && slices.ContainsFunc(todo, func(m clusters.Member) bool { return f.minorOf(im, m) > f.p.minor && f.p.minor > 0 }) {
		return fmt.Errorf("upgrade to %s: some targets run a newer minor release; use downgrade", target)
	}
	for len(todo) > 0 {
		// The leader goes last: moving it costs an election, and it might be moved again otherwise.
		next := 0
		if l, err := f.env.Cluster.Leader(ctx); err == nil && len(todo) > 1 {
			for i, m := range todo {
				if m.Name() != l.Name() {
					next = i
					break
				}
			}
		}
		m := todo[next]
		todo = slices.Delete(todo, next, next+1)
		from := im.MemberVersion(m.Name())
		start := time.Now()
		if err := im.SetImage(ctx, m.Name(), target); err != nil {
			return err
		}
		started := time.Since(start)
		hctx, cancel := context.WithTimeout(ctx, memberMoveTimeout)
		err := f.env.Cluster.WaitHealthy(hctx)
		cancel()
		if err != nil {
			return fmt.Errorf("%s: %s on %s: cluster not healthy within %s: %w", f.name, m.Name(), target, memberMoveTimeout, err)
		}
		f.env.logf("fault %s: %s moved from %s to %s: running after %v, cluster healthy after %v", f.name, m.Name(), from, target,
			started.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// minorOf returns the minor version of the release m runs (0 when unknown: the builtin image).
func (f *Upgrade) minorOf(im imager, m clusters.Member) int {
	v := strings.TrimPrefix(im.MemberVersion(m.Name()), "v")
	var major, minor int
	if _, err := fmt.Sscanf(v, "%d.%d", &major, &minor); err != nil {
		return 0
	}
	return minor
}

// enableDowngrade asks the cluster to accept members of the target's minor version (etcdctl downgrade
// enable) and waits until every member reports that cluster version.
func (f *Upgrade) enableDowngrade(ctx context.Context) error {
	cli, err := f.env.client()
	if err != nil {
		return err
	}
	defer cli.Close()
	want := fmt.Sprintf("3.%d", f.p.minor)
	if err := clusters.Retry(ctx, func(ctx context.Context) error {
		_, err := cli.Downgrade(ctx, clientv3.DowngradeEnable, want)
		if err != nil && strings.Contains(err.Error(), "already enabled") {
			return nil
		}
		return err
	}); err != nil {
		return fmt.Errorf("%s: downgrade enable %s: %w", f.name, want, err)
	}
	start := time.Now()
	for {
		if ok, err := f.clusterVersionIs(ctx, want); ok {
			break
		} else if ctx.Err() != nil {
			return fmt.Errorf("%s: waiting for cluster version %s: %w (last: %v)", f.name, want, ctx.Err(), err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(200 * time.Millisecond):
		}
	}
	f.env.logf("fault %s: downgrade to %s enabled, cluster version %s after %v", f.name, f.p.version, want, time.Since(start).Round(time.Millisecond))
	return nil
}

// clusterVersionIs reports whether every member's /version says the cluster version is want ("3.5").
func (f *Upgrade) clusterVersionIs(ctx context.Context, want string) (bool, error) {
	hc := &http.Client{Timeout: 2 * time.Second}
	if t := f.env.Cluster.TLS(); t != nil {
		hc.Transport = &http.Transport{TLSClientConfig: t}
	}
	defer hc.CloseIdleConnections()
	for _, m := range f.env.Cluster.Members() {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(m.ClientURL(), "/")+"/version", nil)
		if err != nil {
			return false, err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return false, err
		}
		var v struct {
			Cluster string `json:"etcdcluster"`
		}
		err = json.NewDecoder(io.LimitReader(resp.Body, 1<<16)).Decode(&v)
		resp.Body.Close()
		if err != nil {
			return false, fmt.Errorf("version of %s: %w", m.Name(), err)
		}
		if !strings.HasPrefix(v.Cluster, want+".") && v.Cluster != want {
			return false, fmt.Errorf("%s reports cluster version %s", m.Name(), v.Cluster)
		}
	}
	return true, nil
}

// Recover starts any target an interrupted roll-out left stopped, on whatever release it has now.
func (f *Upgrade) Recover(ctx context.Context) error {
	var errs []error
	for _, m := range f.targets {
		if p, ok := m.(clusters.Process); ok && !p.Running() {
			errs = append(errs, p.Start(ctx))
		}
	}
	return errors.Join(errs...)
}
