package clusters

import (
	"context"

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
// must not exist yet or be stopped. If chaosbench dies, the helper unmounts before it goes, and the
// watchdog removes the containers that still see the mount.
func (c *Docker) mountDisk(ctx context.Context, m *containerMember) error {
	fs, err := mountSlowFS(ctx, c.opts.SlowFS, c.spawner, c.opts.Seed, m.name, m.logPath, m.dataDir)
	if err != nil {
		return err
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
		if err := unmountSlowFS(ctx, fs, m.name, m.dataDir); err != nil {
			errs = append(errs, err)
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
