package faults

import (
	"context"
	"errors"
	"fmt"

	"github.com/etcd-chaosbench/chaosbench/clusters"
)

// Kill sends SIGKILL to its targets and starts them again on Recover, on their data directories. With
// drop-unsynced, each target's slowfs first forgets every write not yet fsynced: the member restarts on
// what a disk holds after a power failure. kill:all is a whole-cluster power loss.
type Kill struct {
	base
	killed []clusters.Process
}

// Available needs process control, and slowfs with unsynced-write tracking for drop-unsynced.
func (f *Kill) Available(c clusters.Cluster) error {
	if _, err := processes(c); err != nil {
		return err
	}
	if f.p.dropUnsynced {
		d, ok := c.(disked)
		if !ok {
			return errors.New("drop-unsynced needs slowfs under the members' data directories")
		}
		for _, m := range c.Members() {
			if fs := d.Disk(m.Name()); fs == nil || !fs.Tracking() {
				return fmt.Errorf("drop-unsynced needs slowfs tracking unsynced writes under %s's data", m.Name())
			}
		}
	}
	return nil
}

// Inject kills the targets together.
func (f *Kill) Inject(ctx context.Context) error {
	if err := f.resolve(ctx, running(f.env.Cluster)); err != nil {
		return err
	}
	for _, m := range f.targets {
		f.killed = append(f.killed, m.(clusters.Process))
	}
	err := forEach(f.killed, func(p clusters.Process) error { return p.Kill(ctx) })
	if f.p.dropUnsynced {
		d := f.env.Cluster.(disked)
		for _, p := range f.killed {
			if p.Running() {
				continue // the kill failed; its data is in use
			}
			rep, cerr := d.Disk(p.Name()).Crash(ctx)
			if cerr != nil {
				err = errors.Join(err, fmt.Errorf("drop unsynced writes of %s: %w", p.Name(), cerr))
				continue
			}
			f.env.logf("fault %s: %s lost %d unsynced bytes in %d files", f.name, p.Name(), rep.Bytes, rep.Files)
		}
	}
	return err
}

// Recover starts the killed members that are not running.
func (f *Kill) Recover(ctx context.Context) error {
	return startAll(ctx, f.killed)
}

func startAll(ctx context.Context, ps []clusters.Process) error {
	return forEach(ps, func(p clusters.Process) error {
		if p.Running() {
			return nil
		}
		return p.Start(ctx)
	})
}

// Restart stops its targets gracefully (SIGTERM; a leader hands leadership over first) and starts them
// again when the window ends.
type Restart struct {
	base
	stopped []clusters.Process
}

// Available needs process control.
func (f *Restart) Available(c clusters.Cluster) error {
	_, err := processes(c)
	return err
}

// Inject stops the targets.
func (f *Restart) Inject(ctx context.Context) error {
	if err := f.resolve(ctx, running(f.env.Cluster)); err != nil {
		return err
	}
	for _, m := range f.targets {
		f.stopped = append(f.stopped, m.(clusters.Process))
	}
	return forEach(f.stopped, func(p clusters.Process) error { return p.Stop(ctx) })
}

// Recover starts them again.
func (f *Restart) Recover(ctx context.Context) error { return startAll(ctx, f.stopped) }

// Pause stops its targets with SIGSTOP for the window and resumes them with SIGCONT: the member keeps its
// connections and state but answers nothing, like a machine stalled by a long GC or I/O pause.
type Pause struct {
	base
	paused []clusters.Process
}

// Available needs process control.
func (f *Pause) Available(c clusters.Cluster) error {
	_, err := processes(c)
	return err
}

// Inject pauses the targets; it returns once the kernel reports them stopped.
func (f *Pause) Inject(ctx context.Context) error {
	if err := f.resolve(ctx, running(f.env.Cluster)); err != nil {
		return err
	}
	for _, m := range f.targets {
		f.paused = append(f.paused, m.(clusters.Process))
	}
	return forEach(f.paused, func(p clusters.Process) error { return p.Pause(ctx) })
}

// Recover resumes the paused targets.
func (f *Pause) Recover(ctx context.Context) error {
	return forEach(f.paused, func(p clusters.Process) error {
		if !p.Paused() {
			return nil
		}
		return p.Resume(ctx)
	})
}
