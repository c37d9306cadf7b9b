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
	command := c.opts.SlowFS.Command
	if len(command) == 0 {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("find own executable for slowfs: %w", err)
		}
		command = []string{exe, slowfs.Command}
	}
	log, err := os.OpenFile(m.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("slowfs for %s: open log: %w", m.name, err)
	}
	defer log.Close() // the helper keeps its own descriptor
	fs, err := slowfs.Mount(ctx, slowfs.Options{
		Command: command, Lower: m.diskDir(), Mountpoint: m.dataDir,
		Seed: c.opts.Seed ^ nameHash(m.name), TrackUnsynced: c.opts.SlowFS.TrackUnsynced,
		Log: log,
		// From the spawner thread, with SIGTERM as the death signal: if chaosbench dies, the helper
		// unmounts before it goes.
		Start: func(cmd *exec.Cmd) error { return c.spawner.startWith(cmd, syscall.SIGTERM) },
	})
	if err != nil {
		return fmt.Errorf("data directory of %s: %w", m.name, err)
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
		if fs == nil {
			continue
		}
		if err := fs.Close(ctx); err != nil {
			errs = append(errs, err)
			continue
		}
		// The mount point is an empty directory again; the data goes back to where it is expected.
		if err := os.Remove(m.dataDir); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, fmt.Errorf("data directory of %s: %w", m.name, err))
			continue
		}
		if err := os.Rename(m.diskDir(), m.dataDir); err != nil {
			errs = append(errs, fmt.Errorf("data directory of %s: %w", m.name, err))
		}
	}
	return errs
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

// diskDir is where a slowfs-backed member's data really lives while the cluster runs.
func (m *procMember) diskDir() string {
	return strings.TrimSuffix(m.dataDir, ".etcd") + ".disk"
}
