package clusters

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/etcd-chaosbench/chaosbench/clusters/slowfs"
)

// mountDisk mounts slowfs on m's data directory, backed by m's disk directory, when the cluster uses
// slowfs; the member must not be running.
func (c *Embedded) mountDisk(ctx context.Context, m *procMember) error {
	if c.opts.SlowFS == nil {
		return nil
	}
	fs, err := mountSlowFS(ctx, c.opts.SlowFS, c.spawner, c.opts.Seed, m.name, m.logPath, m.dataDir)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.disk = fs
	m.mu.Unlock()
	return nil
}

// unmountDisks unmounts every member's slowfs and moves the backing data to the data directory, where it
// is without slowfs. Members must have stopped.
func (c *Embedded) unmountDisks(ctx context.Context) []error {
	var errs []error
	for _, m := range c.members {
		m.mu.Lock()
		fs := m.disk
		m.disk = nil
		m.mu.Unlock()
		if err := unmountSlowFS(ctx, fs, m.name, m.dataDir); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// mountSlowFS mounts slowfs on a member's data directory, backed by its disk directory (see diskDir), with
// the helper started by sp and logging to the member's log. Embedded and docker members share it.
func mountSlowFS(ctx context.Context, o *SlowFSOptions, sp *spawner, seed uint64, name, logPath, dataDir string) (*slowfs.FS, error) {
	command := o.Command
	if len(command) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find own executable for slowfs: %w", err)
		}
		command = []string{exe, slowfs.Command}
	}
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("slowfs for %s: open log: %w", name, err)
	}
	defer log.Close() // the helper keeps its own descriptor
	if err := os.MkdirAll(diskDir(dataDir), 0o700); err != nil {
		return nil, fmt.Errorf("slowfs for %s: %w", name, err)
	}
	fs, err := slowfs.Mount(ctx, slowfs.Options{
		Command: command, Lower: diskDir(dataDir), Mountpoint: dataDir,
		Seed: seed ^ nameHash(name), TrackUnsynced: o.TrackUnsynced,
		Log: log,
		// From the spawner thread, with SIGTERM as the death signal: if chaosbench dies, the helper
		// unmounts before it goes.
		Start: func(cmd *exec.Cmd) error { return sp.startWith(cmd, syscall.SIGTERM) },
	})
	if err != nil {
		return nil, fmt.Errorf("data directory of %s: %w", name, err)
	}
	return fs, nil
}

// unmountSlowFS unmounts a member's slowfs (nil: none) and moves the backing data to the data directory,
// where it is without slowfs.
func unmountSlowFS(ctx context.Context, fs *slowfs.FS, name, dataDir string) error {
	if fs == nil {
		return nil
	}
	if err := fs.Close(ctx); err != nil {
		return err
	}
	// The mount point is an empty directory again; the data goes back to where it is expected.
	if err := os.Remove(dataDir); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("data directory of %s: %w", name, err)
	}
	if err := os.Rename(diskDir(dataDir), dataDir); err != nil {
		return fmt.Errorf("data directory of %s: %w", name, err)
	}
	return nil
}

// Disk returns the slowfs mount under the named member's data directory, or nil when the cluster does not
// use slowfs (see EmbedOptions.SlowFS).
func (c *Embedded) Disk(member string) *slowfs.FS {
	for _, m := range c.members {
		if m.name == member {
			m.mu.Lock()
			defer m.mu.Unlock()
			return m.disk
		}
	}
	return nil
}

func nameHash(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return h.Sum64()
}

// diskDir is where the data of a slowfs-backed member with data directory dataDir really lives while the
// cluster runs.
func diskDir(dataDir string) string {
	return strings.TrimSuffix(dataDir, ".etcd") + ".disk"
}
