package clusters

import (
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
)

// fdInode is the inode of conn's socket as /proc/self/fd shows it.
func fdInode(t *testing.T, conn net.Conn) string {
	t.Helper()
	raw, err := conn.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var link string
	var lerr error
	raw.Control(func(fd uintptr) { link, lerr = os.Readlink("/proc/self/fd/" + strconv.Itoa(int(fd))) })
	if lerr != nil {
		t.Fatal(lerr)
	}
	return link
}

func dialPair(t *testing.T, ln net.Listener) (client, server net.Conn) {
	t.Helper()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return client, server
}

// TestSocketInode: the lookup finds the socket of each end of a connection by its four-tuple (the server's
// tuple is the client's reversed, so each end is told from the other), and finds nothing once the
// connection is gone.
func TestSocketInode(t *testing.T) {
	for _, network := range []string{"tcp4", "tcp6"} {
		addr := map[string]string{"tcp4": "127.0.0.1:0", "tcp6": "[::1]:0"}[network]
		ln, err := net.Listen(network, addr)
		if err != nil {
			t.Logf("%s: %v (skipped: no such loopback here)", network, err)
			continue
		}
		defer ln.Close()
		client, server := dialPair(t, ln)
		for _, c := range []net.Conn{client, server} {
			inode, err := socketInode(c.LocalAddr().(*net.TCPAddr), c.RemoteAddr().(*net.TCPAddr))
			if err != nil {
				t.Fatalf("%s: %v", network, err)
			}
			if got, want := "socket:["+strconv.FormatUint(uint64(inode), 10)+"]", fdInode(t, c); got != want {
				t.Fatalf("%s: lookup says %s, /proc/self/fd says %s", network, got, want)
			}
		}
		local, remote := client.LocalAddr().(*net.TCPAddr), client.RemoteAddr().(*net.TCPAddr)
		client.(*net.TCPConn).SetLinger(0) // a reset: no TIME_WAIT socket left with this tuple
		client.Close()
		server.Close()
		if inode, err := socketInode(local, remote); err != errNoSocket {
			t.Fatalf("%s: closed connection: inode %d, error %v; want %v", network, inode, err, errNoSocket)
		}
	}
}

// TestSocketInodeUnderChurn: a socket that lives the whole time is found on every lookup while hundreds
// of others open and close around it, as members' peer connections do at a cluster's start.
func TestSocketInodeUnderChurn(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	client, _ := dialPair(t, ln)
	want := fdInode(t, client)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var closed atomic.Int64 // connections the churn has reset so far
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var open []net.Conn
			for {
				select {
				case <-stop:
					for _, c := range open {
						c.Close()
					}
					return
				default:
				}
				c, err := net.Dial("tcp4", ln.Addr().String())
				if err != nil {
					continue
				}
				open = append(open, c)
				if len(open) > 100 {
					open[0].(*net.TCPConn).SetLinger(0)
					open[0].Close()
					open = open[1:]
					closed.Add(1)
				}
			}
		}()
	}
	go func() { // the listener's side of the churn
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { buf := make([]byte, 1); c.Read(buf); c.Close() }()
		}
	}()
	// At least 2,000 lookups, and as many as it takes for the churn to reset 1,000 connections meanwhile.
	misses, lookups := 0, 0
	for ; lookups < 2000 || closed.Load() < 1000; lookups++ {
		inode, err := socketInode(client.LocalAddr().(*net.TCPAddr), client.RemoteAddr().(*net.TCPAddr))
		if err != nil || "socket:["+strconv.FormatUint(uint64(inode), 10)+"]" != want {
			misses++
		}
	}
	close(stop)
	wg.Wait()
	if misses > 0 {
		t.Fatalf("the socket was missed %d times in %d lookups while %d others were reset", misses, lookups, closed.Load())
	}
}
