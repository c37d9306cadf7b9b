package clusters

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Replace replaces the named member as an operator replaces a failed machine: it removes the member from
// the cluster, stops it, wipes its data directory, adds it back under the same name and peer URL as a
// learner, starts it with --initial-cluster-state=existing so that it fetches a snapshot from the leader,
// and promotes it to a voting member once it has caught up. The member's raft id changes.
func (c *Embedded) Replace(ctx context.Context, name string) error {
	var m *procMember
	var others []string
	for _, pm := range c.members {
		if pm.name == name {
			m = pm
		} else if pm.Running() {
			others = append(others, pm.clientURL)
		}
	}
	if m == nil {
		return fmt.Errorf("replace %s: no such member", name)
	}
	if len(others) == 0 {
		return fmt.Errorf("replace %s: no other member to ask", name)
	}
	if m.ID() == 0 {
		if _, err := c.status.Status(ctx, m); err != nil {
			return fmt.Errorf("replace %s: learn its id: %w", name, err)
		}
	}
	cfg := ClientConfig(c)
	cfg.Endpoints = others
	cfg.Logger = zap.NewNop()
	cli, err := clientv3.New(cfg)
	if err != nil {
		return fmt.Errorf("replace %s: %w", name, err)
	}
	defer cli.Close()

	// A removed member shuts itself down: that exit is asked for, not a crash.
	m.mu.Lock()
	m.stopping = true
	m.mu.Unlock()
	if err := Retry(ctx, func(ctx context.Context) error {
		_, err := cli.MemberRemove(ctx, m.ID())
		if errors.Is(err, rpctypes.ErrMemberNotFound) {
			return nil // an earlier attempt went through
		}
		return err
	}); err != nil {
		return fmt.Errorf("replace %s: remove: %w", name, err)
	}
	if m.Running() {
		if err := m.Stop(ctx); err != nil {
			return fmt.Errorf("replace %s: %w", name, err)
		}
	}
	if err := wipe(m.dataDir); err != nil {
		return fmt.Errorf("replace %s: wipe data: %w", name, err)
	}
	var newID uint64
	if err := Retry(ctx, func(ctx context.Context) error {
		resp, err := cli.MemberAddAsLearner(ctx, []string{m.peerURL})
		if err != nil {
			return err
		}
		newID = resp.Member.ID
		return nil
	}); err != nil {
		return fmt.Errorf("replace %s: add back: %w", name, err)
	}
	m.mu.Lock()
	for i, a := range m.argv {
		if a == "--initial-cluster-state=new" {
			m.argv[i] = "--initial-cluster-state=existing"
		}
	}
	m.mu.Unlock()
	m.setID(newID)
	if err := m.Start(ctx); err != nil {
		return fmt.Errorf("replace %s: %w", name, err)
	}
	// A learner is promoted only once its log has caught up with the leader's; until then etcd answers
	// "can only promote a learner member which is in sync with leader".
	if err := Retry(ctx, func(ctx context.Context) error {
		_, err := cli.MemberPromote(ctx, newID)
		return err
	}); err != nil {
		return fmt.Errorf("replace %s: promote: %w", name, err)
	}
	return nil
}

// Retry calls fn, with a 5 s timeout each time, until it succeeds or ctx ends, 200 ms apart: membership
// changes and cluster-wide requests fail while an election is under way or a learner catches up.
func Retry(ctx context.Context, fn func(context.Context) error) error {
	for {
		actx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err := fn(actx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %v)", ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// wipe removes everything inside dir but dir itself, which may be a mount point.
func wipe(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil && !strings.Contains(err.Error(), "no such file") {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
