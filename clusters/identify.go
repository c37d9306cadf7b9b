package clusters

import (
	"bufio"
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// identifySender names the member that opened a connection to one of the cluster's peer proxies, for
// connections whose first request carries no X-Server-From header: version probes, lease forwarding
// (/leases), member-list and downgrade requests. Members are local processes, so the kernel knows: the
// connection's source address is a socket in /proc/net/tcp(6), and the member whose /proc/<pid>/fd holds
// that socket's inode sent it. Without this, a partitioned member could still forward lease renewals to the
// leader, and a partition would not be one.
//
// It returns the member's id in hex, as X-Server-From carries it, or "" when the connection is not a
// member's (or the member's id is not known yet).
func (c *Embedded) identifySender(remote net.Addr) string {
	addr, ok := remote.(*net.TCPAddr)
	if !ok {
		return ""
	}
	inode, err := socketInode(addr)
	if err != nil || inode == "" {
		return ""
	}
	target := "socket:[" + inode + "]"
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

// socketInode finds the inode of the established TCP socket whose local address is addr.
func socketInode(addr *net.TCPAddr) (string, error) {
	files := []string{"/proc/net/tcp", "/proc/net/tcp6"}
	want := procAddr(addr)
	for _, f := range files {
		inode, err := scanSockets(f, want)
		if err != nil {
			continue
		}
		if inode != "" {
			return inode, nil
		}
	}
	return "", nil
}

// procAddr renders addr as /proc/net/tcp(6) does: the IP as the kernel's native-endian words in hex, a
// colon, the port in hex. IPv4 addresses are also matched in their IPv4-mapped IPv6 form.
func procAddr(addr *net.TCPAddr) []string {
	port := fmt.Sprintf("%04X", addr.Port)
	var out []string
	if ip4 := addr.IP.To4(); ip4 != nil {
		out = append(out, wordsHex(ip4)+":"+port)
		out = append(out, wordsHex(net.IP(ip4).To16())+":"+port)
	} else {
		out = append(out, wordsHex(addr.IP.To16())+":"+port)
	}
	return out
}

// wordsHex renders an address as /proc does: each 32-bit word in host (little-endian) byte order.
func wordsHex(ip []byte) string {
	var b strings.Builder
	for i := 0; i+4 <= len(ip); i += 4 {
		w := []byte{ip[i+3], ip[i+2], ip[i+1], ip[i]}
		b.WriteString(strings.ToUpper(hex.EncodeToString(w)))
	}
	return b.String()
}

func scanSockets(path string, want []string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
		if len(fields) < 10 {
			continue
		}
		for _, w := range want {
			if fields[1] == w {
				return fields[9], nil
			}
		}
	}
	return "", sc.Err()
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
