package clusters

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
)

// identifySender names the member that opened a connection to one of the cluster's peer proxies, for
// connections whose first request carries no X-Server-From header: version probes, lease forwarding
// (/leases), member-list and downgrade requests. Members are local processes, so the kernel knows: the
// connection's four-tuple names one socket (see socketInode), and the member whose /proc/<pid>/fd holds
// that socket's inode sent it. Without this, a partitioned member could still forward lease renewals to the
// leader, and a partition would not be one.
//
// It returns the member's id in hex, as X-Server-From carries it, or "" when the connection is not a
// member's (or the member's id is not known yet).
func (c *Embedded) identifySender(remote, local net.Addr) string {
	from, ok := remote.(*net.TCPAddr)
	to, ok2 := local.(*net.TCPAddr)
	if !ok || !ok2 {
		return ""
	}
	// The sender's socket: its own address is the connection's remote one, its peer the proxy.
	inode, err := socketInode(from, to)
	if err != nil {
		return ""
	}
	target := "socket:[" + strconv.FormatUint(uint64(inode), 10) + "]"
	for _, m := range c.members {
		pid := m.PID()
		if pid == 0 {
			continue
		}
		if ownsFD(pid, target) {
			if id := m.ID(); id != 0 {
				return strconv.FormatUint(id, 16)
			}
			return ""
		}
	}
	return ""
}

// ownsFD reports whether process pid has a file descriptor open on target ("socket:[inode]").
func ownsFD(pid int, target string) bool {
	dir := filepath.Join("/proc", strconv.Itoa(pid), "fd")
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false
	}
	for _, e := range entries {
		if l, err := os.Readlink(filepath.Join(dir, e.Name())); err == nil && l == target {
			return true
		}
	}
	return false
}
