package faults

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/etcd-chaosbench/chaosbench/clusters"
)

// Operations under load: maintenance an operator runs on a live cluster. Their window is the operation
// itself (Inject returns when it is done) unless they repeat for a duration.

// client returns an etcd client of the cluster, on the given endpoints (all when none).
func (e *Env) client(endpoints ...string) (*clientv3.Client, error) {
	cfg := clusters.ClientConfig(e.Cluster)
	if len(endpoints) > 0 {
		cfg.Endpoints = endpoints
	}
	cfg.Logger = zap.NewNop()
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to etcd: %w", err)
	}
	return cli, nil
}

// Defrag defragments its targets' databases one after the other, as etcdctl defrag does; a member
// blocks its reads and writes while it defragments.
type Defrag struct{ base }

// Available: any cluster a client reaches.
func (f *Defrag) Available(clusters.Cluster) error { return nil }

// Inject defragments.
func (f *Defrag) Inject(ctx context.Context) error {
	if err := f.resolve(ctx, running(f.env.Cluster)); err != nil {
		return err
	}
	cli, err := f.env.client()
	if err != nil {
		return err
	}
	defer cli.Close()
	for _, m := range f.targets {
		start := time.Now()
		p, isProcess := m.(clusters.Process)
		pid := 0
		if isProcess {
			pid = p.PID()
		}
		if _, err := cli.Defragment(ctx, m.ClientURL()); err != nil {
			// A member whose process went away inside its defragmentation crashed there (an armed
			// failpoint's panic, or a bug): that is what the schedule exercises, not a defragmentation
			// the harness failed to run. Whoever crashed it starts it again (perhaps before the call
			// gave up: a new process); an unexpected crash is the run's member-crashed finding, judged
			// with the members' exits, not here.
			if isProcess && (p.PID() != pid || exitsWithin(ctx, p, 3*time.Second)) {
				f.env.logf("fault %s: %s crashed inside its defragmentation (%v)", f.name, m.Name(), err)
				continue
			}
			return fmt.Errorf("defragment %s: %w", m.Name(), err)
		}
		f.env.logf("fault %s: defragmented %s in %v", f.name, m.Name(), time.Since(start).Round(time.Millisecond))
	}
	return nil
}

// Recover has nothing to undo.
func (f *Defrag) Recover(context.Context) error { return nil }

// Compact compacts the keyspace at the current revision, once, or every interval for the window (a
// compaction burst). Workloads reading old revisions then see "required revision has been compacted".
// A revision already compacted (nothing was written since the last compaction) is not a failure: the
// keyspace is as asked.
type Compact struct {
	base
	stop chan struct{}
	done chan struct{}

	mu       sync.Mutex
	tries    int   // compactions of the burst after the first
	idle     int   // of which found nothing new to compact
	failed   int   // of which failed
	firstErr error // the first failure
}

// Available: any cluster a client reaches.
func (f *Compact) Available(clusters.Cluster) error { return nil }

// Inject compacts, and keeps compacting every interval until Recover when asked to.
func (f *Compact) Inject(ctx context.Context) error {
	if l, err := f.env.Cluster.Leader(ctx); err == nil {
		f.leader = l.Name()
	}
	cli, err := f.env.client()
	if err != nil {
		return err
	}
	// compact compacts at the current revision; idle: it was compacted already (etcd answers
	// ErrCompacted), as happens when nothing was written since the last compaction.
	compact := func(ctx context.Context) (idle bool, err error) {
		resp, err := cli.Get(ctx, "compact-revision-probe", clientv3.WithCountOnly())
		if err != nil {
			return false, fmt.Errorf("compact: read revision: %w", err)
		}
		_, err = cli.Compact(ctx, resp.Header.Revision)
		for try := 0; try < 3 && status.Code(err) == codes.Unavailable && ctx.Err() == nil; try++ {
			// The member the client reached went away inside the compaction (an armed failpoint crashes
			// a member there): the compaction may have been applied by the others. It is asked again,
			// at the same revision, through a member that answers; "compacted" then means it was.
			f.env.logf("fault %s: compact at %d: %v; again through another member", f.name, resp.Header.Revision, err)
			select {
			case <-ctx.Done():
				return false, nil // the burst's end or an interrupt: as a cancelled compaction
			case <-time.After(200 * time.Millisecond):
			}
			_, err = cli.Compact(ctx, resp.Header.Revision)
		}
		switch {
		case errors.Is(err, rpctypes.ErrCompacted):
			return true, nil
		case err != nil && !errors.Is(err, context.Canceled):
			return false, fmt.Errorf("compact at %d: %w", resp.Header.Revision, err)
		}
		return false, nil
	}
	idle, err := compact(ctx)
	if err != nil {
		cli.Close()
		return err
	}
	if idle {
		f.env.logf("fault %s: nothing new to compact", f.name)
	}
	if f.p.interval <= 0 || f.hold <= 0 {
		cli.Close()
		return nil
	}
	f.stop, f.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(f.done)
		defer cli.Close()
		t := time.NewTicker(f.p.interval)
		defer t.Stop()
		for {
			select {
			case <-f.stop:
				f.mu.Lock()
				f.env.logf("fault %s: compactions after the first: %d, of which %d found nothing new to compact and %d failed", f.name, f.tries, f.idle, f.failed)
				f.mu.Unlock()
				return
			case <-t.C:
				select {
				case <-f.stop:
					continue // a tick left over from a slow compaction: the burst is over
				default:
				}
				cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				idle, err := compact(cctx)
				cancel()
				f.mu.Lock()
				f.tries++
				if idle {
					f.idle++
				}
				if err != nil {
					f.failed++
					f.firstErr = cmp.Or(f.firstErr, err)
				}
				f.mu.Unlock()
				if err != nil {
					f.env.logf("fault %s: %v", f.name, err)
				}
			}
		}
	}()
	return nil
}

// Recover ends a compaction burst.
func (f *Compact) Recover(context.Context) error {
	if f.stop != nil {
		close(f.stop)
		<-f.done
	}
	return nil
}

// failures says, in one line, how many compactions of the burst failed after Inject returned ("" when
// none did): Inject reports only the first compaction, and the window's outcome only the heal.
func (f *Compact) failures() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failed == 0 {
		return ""
	}
	return fmt.Sprintf("compaction burst: %d of %d compactions after the first failed; first: %v", f.failed, f.tries, f.firstErr)
}

// Replace replaces a member the way an operator replaces a failed machine: remove, wipe, add back as a
// learner, promote (see clusters.Embedded.Replace). The member's raft id changes.
type Replace struct{ base }

// Available needs a cluster that can replace members and at least 3 members.
func (f *Replace) Available(c clusters.Cluster) error {
	if _, ok := c.(replacer); !ok {
		return fmt.Errorf("needs control of member processes, which a %s cluster does not offer", c.Backend())
	}
	if len(c.Members()) < 3 {
		return errors.New("replacing a member needs at least 3 members")
	}
	return nil
}

// Inject replaces the target.
func (f *Replace) Inject(ctx context.Context) error {
	if err := f.resolve(ctx, running(f.env.Cluster)); err != nil {
		return err
	}
	if len(f.targets) != 1 {
		return fmt.Errorf("replace one member at a time, not %d", len(f.targets))
	}
	start := time.Now()
	if err := f.env.Cluster.(replacer).Replace(ctx, f.targets[0].Name()); err != nil {
		return err
	}
	f.env.logf("fault %s: replaced %s in %v", f.name, f.targets[0].Name(), time.Since(start).Round(time.Millisecond))
	return nil
}

// Recover starts the member again if the replacement stopped half way with it down.
func (f *Replace) Recover(ctx context.Context) error {
	for _, m := range f.targets {
		if p, ok := m.(clusters.Process); ok && !p.Running() {
			return p.Start(ctx)
		}
	}
	return nil
}

// Snapshot streams a snapshot of its target's database into the run directory, as etcdctl snapshot save
// does, and removes the file afterwards: the load on the member (a consistent read of the whole database
// and its transfer) is the point, not the file.
type Snapshot struct{ base }

// Available: any cluster a client reaches.
func (f *Snapshot) Available(clusters.Cluster) error { return nil }

// Inject saves the snapshot.
func (f *Snapshot) Inject(ctx context.Context) error {
	if err := f.resolve(ctx, running(f.env.Cluster)); err != nil {
		return err
	}
	for _, m := range f.targets {
		if err := f.save(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

func (f *Snapshot) save(ctx context.Context, m clusters.Member) error {
	cli, err := f.env.client(m.ClientURL())
	if err != nil {
		return err
	}
	defer cli.Close()
	start := time.Now()
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		return fmt.Errorf("snapshot of %s: %w", m.Name(), err)
	}
	defer rc.Close()
	dir := f.env.Dir
	if dir == "" {
		dir = os.TempDir()
	}
	file, err := os.CreateTemp(dir, "snapshot-"+m.Name()+"-*.db")
	if err != nil {
		return fmt.Errorf("snapshot of %s: %w", m.Name(), err)
	}
	defer os.Remove(file.Name())
	n, err := io.Copy(file, rc)
	if err == nil {
		err = file.Sync()
	}
	file.Close()
	if err != nil {
		return fmt.Errorf("snapshot of %s: %w", m.Name(), err)
	}
	f.env.logf("fault %s: saved a %d-byte snapshot of %s in %v (%s, removed)", f.name, n, m.Name(),
		time.Since(start).Round(time.Millisecond), filepath.Base(file.Name()))
	return nil
}

// Recover has nothing to undo.
func (f *Snapshot) Recover(context.Context) error { return nil }
