package clusters

import (
	"encoding/hex"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// requireAttributed fails the test for every connection to member's peer proxy that is still open, is
// not a raft connection (those carry X-Server-From), was opened by one of c's members, and was not
// attributed to it. A connection another process opened is rightly unattributed: on a machine shared with
// other tests a member of another cluster can reach a port this cluster's proxy took over after it.
//
// Who opened a connection is found independently of the code under test: by the source address in
// /proc/net/tcp and the process that holds the socket, among all processes.
func requireAttributed(t *testing.T, c *Embedded, member string) {
	t.Helper()
	px := c.Proxy(member)
	pids := map[int]string{}
	for _, m := range c.members {
		pids[m.PID()] = m.Name()
	}
	for _, conn := range px.Conns() {
		if conn.From != "" || strings.HasPrefix(conn.Path, "/raft") {
			continue
		}
		pid, err := socketOwner(conn.Remote.(*net.TCPAddr), px.Addr())
		select {
		case <-conn.Closed:
			continue // gone meanwhile: nothing to tell
		default:
		}
		switch {
		case err != nil:
			t.Errorf("proxy of %s: unattributed connection %s from %s, and its owner is unknown: %v", member, conn.Path, conn.Remote, err)
		case pids[pid] != "":
			t.Errorf("proxy of %s: connection %s from %s was opened by %s (pid %d) and not attributed", member, conn.Path, conn.Remote, pids[pid], pid)
		default:
			cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
			t.Logf("proxy of %s: connection %s from %s is another process's (pid %d, %q): rightly unattributed",
				member, conn.Path, conn.Remote, pid, strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
}

// socketOwner returns the pid of the process holding the TCP socket from src to dst ("host:port").
func socketOwner(src *net.TCPAddr, dst string) (int, error) {
	to, err := net.ResolveTCPAddr("tcp", dst)
	if err != nil {
		return 0, err
	}
	if src.IP.To4() == nil || to.IP.To4() == nil {
		return 0, fmt.Errorf("%v to %v: only IPv4 sockets are looked up here (peer proxies listen on 127.0.0.1)", src, to)
	}
	hexAddr := func(a *net.TCPAddr) string {
		ip := a.IP.To4()
		return strings.ToUpper(hex.EncodeToString([]byte{ip[3], ip[2], ip[1], ip[0]})) + fmt.Sprintf(":%04X", a.Port)
	}
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		return 0, err
	}
	inode := ""
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) > 9 && f[1] == hexAddr(src) && f[2] == hexAddr(to) {
			inode = f[9]
		}
	}
	if inode == "" {
		return 0, fmt.Errorf("no socket from %v to %v in /proc/net/tcp", src, to)
	}
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		if ownsFD(pid, "socket:["+inode+"]") {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("no process holds socket %s", inode)
}
