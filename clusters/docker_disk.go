package clusters

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/etcd-chaosbench/chaosbench/clusters/slowfs"
)

// Disk faults on containers use the same slowfs as embedded members: a FUSE loopback filesystem served by
// a helper process on the host, mounted on the member's data directory before its container is created,
// so that the bind mount of that directory into the container shows the FUSE mount. The container runs
// as the user who mounted it, in the host's user namespace, which is who a FUSE mount without allow_other
// admits: no privileges, devices or FUSE inside the container are needed. It is the same mechanism with
// the same abilities (fsync and write delays with jitter, unsynced writes dropped on a kill) as on
// embedded clusters, where strace on the member's host PID would delay fdatasync by a fixed time only and
// stop the member at every system call. Like on embedded clusters it is mounted only when the schedule has
// disk faults: every disk operation pays a round trip through the helper.

// mountDisk mounts slowfs on m's data directory, backed by m's disk directory; the member's container
// must not exist yet or be stopped.
func (c *Docker) mountDisk(ctx context.Context, m *containerMember) error {
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
	if err := os.MkdirAll(m.diskDir(), 0o700); err != nil {
		return fmt.Errorf("slowfs for %s: %w", m.name, err)
	}
	fs, err := slowfs.Mount(ctx, slowfs.Options{
		Command: command, Lower: m.diskDir(), Mountpoint: m.dataDir,
		Seed: c.opts.Seed ^ nameHash(m.name), TrackUnsynced: c.opts.SlowFS.TrackUnsynced,
		Log: log,
		// From the spawner thread, with SIGTERM as the death signal: if chaosbench dies, the helper
		// unmounts before it goes (the watchdog removes the containers that still see the mount).
		Start: func(cmd *exec.Cmd) error { return c.spawner.startWith(cmd, syscall.SIGTERM) },
	})
	if err != nil {
		return fmt.Errorf("data directory of %s: %w", m.name, err)
	}
	m.mu.Lock()
	m.disk = fs
	m.mu.Unlock()
	c.events.Printf("slowfs on %s's data directory (helper pid %d)", m.name, fs.PID())
	return nil
}

// unmountDisks unmounts every member's slowfs and moves the backing data to the data directory, where it
// is without slowfs. The containers must have been removed.
func (c *Docker) unmountDisks(ctx context.Context) []error {
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
// use slowfs (see DockerOptions.SlowFS).
func (c *Docker) Disk(member string) *slowfs.FS {
	for _, m := range c.members {
		if m.name == member {
			m.mu.Lock()
			defer m.mu.Unlock()
			return m.disk
		}
	}
	return nil
}

// diskDir is where a slowfs-backed member's data really lives while the cluster runs.
func (m *containerMember) diskDir() string {
	return strings.TrimSuffix(m.dataDir, ".etcd") + ".disk"
}
