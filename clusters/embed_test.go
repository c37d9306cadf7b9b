package clusters

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

func TestMain(m *testing.M) {
	RunMemberIfRequested()
	os.Exit(m.Run())
}

func startCluster(t *testing.T, members int, flags ...string) *Embedded {
	t.Helper()
	ef, err := ParseEtcdFlags(flags)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := StartEmbedded(ctx, EmbedOptions{Members: members, Dir: t.TempDir(), EtcdFlags: ef})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(context.Background()); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return c
}

// newClient returns a client of c, closed when the test ends; given members, it reaches only those.
func newClient(t *testing.T, c Cluster, only ...Member) *clientv3.Client {
	t.Helper()
	cfg := ClientConfig(c)
	if len(only) > 0 {
		cfg.Endpoints = nil
		for _, m := range only {
			cfg.Endpoints = append(cfg.Endpoints, m.ClientURL())
		}
	}
	cfg.Logger = zap.NewNop()
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

func TestEmbeddedKillLeaderRecovers(t *testing.T) {
	t.Parallel() // its own cluster; judges no latency
	c := startCluster(t, 3, "heartbeat-interval=50", "election-timeout=500")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("leader %s", leader.Name())
	p := leader.(Process)
	if err := p.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if p.Running() {
		t.Fatal("killed member still running")
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatalf("two members left should elect a leader: %v", err)
	}
	newLeader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if newLeader.Name() == leader.Name() {
		t.Fatalf("leader %s was killed but is still named leader", leader.Name())
	}
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatalf("restarted member should rejoin: %v", err)
	}
	cli := newClient(t, c)
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatal(err)
	}
}

func TestEmbeddedPauseResumeAndRestart(t *testing.T) {
	t.Parallel() // its own cluster; judges no latency
	c := startCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cli := newClient(t, c)
	m := c.Members()[0].(Process)
	pid := m.PID()

	if err := m.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if !m.Paused() || !m.Running() {
		t.Fatalf("paused member: Paused=%v Running=%v", m.Paused(), m.Running())
	}
	if st := state(pid); st != "T" {
		t.Fatalf("process state %q after Pause, want T (stopped)", st)
	}
	pctx, pcancel := context.WithTimeout(ctx, 500*time.Millisecond)
	_, err := cli.Put(pctx, "k", "during pause")
	pcancel()
	if err == nil {
		t.Fatal("a put to the only member succeeded while it was paused")
	}
	if err := m.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.Put(ctx, "k", "after resume"); err != nil {
		t.Fatalf("put after resume: %v", err)
	}

	if err := m.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if m.PID() == pid || m.PID() == 0 {
		t.Fatalf("restart kept pid %d", pid)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "after resume" {
		t.Fatalf("after a restart on the same data dir, k = %v", resp.Kvs)
	}
	if err := m.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if m.Running() || m.PID() != 0 {
		t.Fatal("stopped member still running")
	}
	if state(pid) != "" {
		t.Fatalf("process %d still exists after Stop", pid)
	}
}

func TestEmbeddedFiveMembers(t *testing.T) {
	t.Parallel() // its own cluster; judges no latency
	c := startCluster(t, 5)
	if len(c.Members()) != 5 || len(c.Endpoints()) != 5 {
		t.Fatalf("%d members, %d endpoints", len(c.Members()), len(c.Endpoints()))
	}
	cli := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Members) != 5 {
		t.Fatalf("etcd lists %d members", len(list.Members))
	}
	// Every peer URL etcd knows is one of the cluster's proxies: peer traffic flows through them.
	for _, m := range list.Members {
		found := false
		for _, cm := range c.Members() {
			if m.PeerURLs[0] == cm.PeerURL() && c.Proxy(cm.Name()) != nil && "http://"+c.Proxy(cm.Name()).Addr() == cm.PeerURL() {
				found = true
			}
		}
		if !found {
			t.Errorf("member %s advertises %v, not a proxy", m.Name, m.PeerURLs)
		}
	}
	// Raft streams run between all members, so every proxy carries identified connections.
	for _, cm := range c.Members() {
		senders := map[string]bool{}
		for _, conn := range c.Proxy(cm.Name()).Conns() {
			senders[conn.From] = true
		}
		if len(senders) < 4 {
			t.Errorf("proxy of %s sees senders %v, want the 4 other members", cm.Name(), senders)
		}
	}
}

func TestExternalMutualTLS(t *testing.T) {
	t.Parallel() // its own cluster; judges no latency
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	dir := t.TempDir()
	embedded, err := StartEmbedded(ctx, EmbedOptions{Members: 1, Dir: dir, TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	defer embedded.Close(context.Background())
	files, ok := embedded.ClientTLSFiles()
	if !ok || !strings.HasPrefix(embedded.Endpoints()[0], "https://") {
		t.Fatalf("TLS cluster endpoints %v", embedded.Endpoints())
	}

	ext, err := ConnectExternal(ctx, ExternalOptions{Endpoints: embedded.Endpoints(), CACert: files.CA, Cert: files.Cert, Key: files.Key})
	if err != nil {
		t.Fatalf("connect with client certificate: %v", err)
	}
	defer ext.Close(ctx)
	if len(ext.Members()) != 1 || ext.Members()[0].Name() != "m1" {
		t.Fatalf("external members %v", ext.Members())
	}
	if _, ok := ext.Members()[0].(Process); ok {
		t.Fatal("an external member must not offer process controls")
	}
	if err := ext.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	if l, err := ext.Leader(ctx); err != nil || l.Name() != "m1" {
		t.Fatalf("leader %v, %v", l, err)
	}
	cli := newClient(t, ext)
	if _, err := cli.Put(ctx, "tls", "ok"); err != nil {
		t.Fatal(err)
	}

	// Without the client certificate the server refuses the connection: a usage error, quickly.
	_, err = ConnectExternal(ctx, ExternalOptions{Endpoints: embedded.Endpoints(), CACert: files.CA, ConnectTimeout: 2 * time.Second})
	if err == nil || !outcome.IsUsage(err) {
		t.Fatalf("connecting without a client certificate: %v, want a usage error", err)
	}

	// A bare host:port speaks TLS when TLS files are given, as etcdctl does.
	hostPort := strings.TrimPrefix(embedded.Endpoints()[0], "https://")
	bare, err := ConnectExternal(ctx, ExternalOptions{Endpoints: []string{hostPort}, CACert: files.CA, Cert: files.Cert, Key: files.Key})
	if err != nil {
		t.Fatalf("connect to %s with TLS files: %v", hostPort, err)
	}
	defer bare.Close(ctx)
	if got := bare.Endpoints(); len(got) != 1 || got[0] != embedded.Endpoints()[0] {
		t.Fatalf("endpoints %q, want %q", got, embedded.Endpoints()[0])
	}
	if _, err := newClient(t, bare).Put(ctx, "tls", "bare"); err != nil {
		t.Fatal(err)
	}
}

func TestExternalBadEndpoints(t *testing.T) {
	ctx := context.Background()
	for _, tt := range []struct {
		opts ExternalOptions
		want string
	}{
		{ExternalOptions{}, "needs --endpoints"},
		{ExternalOptions{Endpoints: []string{"127.0.0.1:99999"}}, `--endpoints "127.0.0.1:99999": port "99999"`},
		{ExternalOptions{Endpoints: []string{"ftp://127.0.0.1:2379"}}, `unknown scheme "ftp"`},
		{ExternalOptions{Endpoints: []string{"http://127.0.0.1:2379"}, Cert: "c.pem"}, "--cert and --key go together"},
		{ExternalOptions{Endpoints: []string{"https://127.0.0.1:2379"}, CACert: "/nonexistent/ca.pem"}, "TLS files"},
		{ExternalOptions{Endpoints: []string{"http://127.0.0.1:1"}, ConnectTimeout: time.Second}, "cannot reach etcd at http://127.0.0.1:1"},
	} {
		_, err := ConnectExternal(ctx, tt.opts)
		if err == nil || !strings.Contains(err.Error(), tt.want) || !outcome.IsUsage(err) {
			t.Errorf("ConnectExternal(%+v) = %v, want a usage error containing %q", tt.opts, err, tt.want)
		}
	}
}

// state returns the state letter of a process, or "" if it is gone.
func state(pid int) string {
	s, _ := procState(pid)
	return s
}

// TestStartFailsFastWithEtcdsReason: a member that exits during start-up (here etcd refuses a data
// directory it cannot use) fails the start at once, with etcd's reason, instead of at the health timeout.
func TestStartFailsFastWithEtcdsReason(t *testing.T) {
	dir := t.TempDir()
	// A file where m1's data directory should be.
	if err := os.MkdirAll(filepath.Join(dir, "members"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "members", "m1.etcd"), []byte("not a directory"), 0o644); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	_, err := StartEmbedded(context.Background(), EmbedOptions{Members: 1, Dir: dir})
	if err == nil {
		t.Fatal("a member without a usable data directory started")
	}
	if took := time.Since(began); took > 20*time.Second {
		t.Fatalf("failing start took %v", took)
	}
	if !strings.Contains(err.Error(), "m1 exited during start-up") || !strings.Contains(err.Error(), "m1.etcd") {
		t.Fatalf("error does not carry etcd's reason: %v", err)
	}
	t.Log(err)
}

// TestIdentifySender: connections that carry no X-Server-From header, such as a follower forwarding a
// lease renewal to the leader (/leases), are attributed to the member process that opened them (that a
// partition cuts lease forwarding is tested in package faults).
func TestIdentifySender(t *testing.T) {
	c := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var follower Member
	for _, m := range c.Members() {
		if m.Name() != leader.Name() {
			follower = m
		}
	}
	cfg := ClientConfig(c)
	cfg.Endpoints = []string{follower.ClientURL()}
	cfg.Logger = zap.NewNop()
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	lease, err := cli.Grant(ctx, 30)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.KeepAliveOnce(ctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	// The renewal went over the follower's pool of plain HTTP connections to the leader (version probes,
	// member lists and lease forwarding share it, so the connection's first request may be any of them):
	// every such connection is attributed to the member that opened it.
	want := fmt.Sprintf("%x", follower.ID())
	var seen []string
	found := false
	for _, conn := range c.Proxy(leader.Name()).Conns() {
		seen = append(seen, conn.Path+" from "+conn.From)
		if strings.HasPrefix(conn.Path, "/raft") {
			continue // raft streams and pipelines carry X-Server-From
		}
		if conn.From == want {
			found = true
		}
	}
	if !found {
		t.Fatalf("leader's proxy has no plain HTTP connection attributed to the follower %s (%s): %v", follower.Name(), want, seen)
	}
	requireAttributed(t, c, leader.Name())
}

// TestMemberIDsKnownBeforeStart: the ids computed before start are the ones etcd uses, so that every
// peer connection can be attributed from the start.
func TestMemberIDsKnownBeforeStart(t *testing.T) {
	t.Parallel() // its own cluster; judges no latency
	c := startCluster(t, 3)
	want := map[uint64]string{}
	for _, m := range c.Members() {
		want[m.ID()] = m.Name()
	}
	cli := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	list, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range list.Members {
		if want[m.ID] != m.Name {
			t.Fatalf("etcd says %s is %x; computed ids %v", m.Name, m.ID, want)
		}
	}
	// Every open peer connection a member opened is attributed to it.
	for _, m := range c.Members() {
		requireAttributed(t, c, m.Name())
	}
}

// TestWaitHealthyWaitsForADownMember: a wait that begins while no member runs (a single member down at a
// fault window's end, being started again) waits for it within its bound instead of failing at once, and
// still fails when the bound passes with no member back. About 5 s.
func TestWaitHealthyWaitsForADownMember(t *testing.T) {
	c := startCluster(t, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	p := c.Members()[0].(Process)
	if err := p.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	short, cancelShort := context.WithTimeout(ctx, time.Second)
	err := c.WaitHealthy(short)
	cancelShort()
	if err == nil {
		t.Fatal("WaitHealthy passed with the only member down")
	}
	if waited := time.Since(began); waited < 900*time.Millisecond {
		t.Fatalf("WaitHealthy gave up after %v (%v), before its 1s bound", waited, err)
	}
	done := make(chan error, 1)
	go func() { done <- c.WaitHealthy(ctx) }()
	time.Sleep(500 * time.Millisecond)
	if err := p.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("WaitHealthy begun while the member was down: %v, want it healthy once started again", err)
	}
}

// TestKillWhileAFailpointIsWithdrawn: a member killed by one fault while another withdraws its failpoint's
// "may panic" (an arm that failed because the member was dying, a disarm) still ended as asked: its exit is
// expected, not a crash. With one flag for both, the withdrawal cleared the kill's, and explore reported
// its own kill:leader as the leader crashing (signal: killed).
func TestKillWhileAFailpointIsWithdrawn(t *testing.T) {
	t.Parallel()
	exits := make(chan ExitEvent, 4)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := StartEmbedded(ctx, EmbedOptions{Members: 1, Dir: t.TempDir(), OnExit: func(ev ExitEvent) { exits <- ev }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	m := c.members[0]
	c.ExpectCrash(m.name, true)
	if _, err := m.signal(syscall.SIGKILL, true); err != nil {
		t.Fatal(err)
	}
	c.ExpectCrash(m.name, false)
	select {
	case ev := <-exits:
		if !ev.Expected {
			t.Fatalf("the killed member's exit %+v is not expected: a kill would be reported as a crash", ev)
		}
	case <-ctx.Done():
		t.Fatal("the killed member did not exit")
	}
	// And a failpoint's panic that nothing else asked for stays expected only while it is armed.
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	c.ExpectCrash(m.name, true)
	c.ExpectCrash(m.name, false)
	if _, err := m.signal(syscall.SIGKILL, false); err != nil { // a crash: no fault asked for it
		t.Fatal(err)
	}
	select {
	case ev := <-exits:
		if ev.Expected {
			t.Fatalf("an exit after the failpoint was withdrawn is expected: %+v", ev)
		}
	case <-ctx.Done():
		t.Fatal("the member did not exit")
	}
}

// TestLastLogError: the reason given for a member's exit during start-up is etcd's last logged error, or
// the plain text a failpoint build's gofail endpoint writes before etcd logs anything, which is how a port
// taken between our probe and the member's bind is recognised (and start-up retried with fresh ports).
func TestLastLogError(t *testing.T) {
	for _, tc := range []struct{ name, log, want string }{
		{"gofail's bind", "=== chaosbench: starting m4 at now: [etcd]\nlisten tcp 127.0.0.1:42465: bind: address already in use\n=== chaosbench: m4 (pid 1) ended at now: exit status 1\n",
			"listen tcp 127.0.0.1:42465: bind: address already in use"},
		{"etcd's error", "=== chaosbench: starting m1\n" + `{"level":"info","msg":"starting"}` + "\n" + `{"level":"warn","msg":"failed to start","error":"member count is unequal"}` + "\n",
			"failed to start: member count is unequal"},
		{"a port taken, then other errors", "listen tcp 127.0.0.1:1: bind: address already in use\n" + `{"level":"fatal","msg":"exit","error":"other"}` + "\n",
			"listen tcp 127.0.0.1:1: bind: address already in use"},
		{"a Go panic", "=== chaosbench: starting m1\npanic: boom\n\ngoroutine 1 [running]:\nmain.main()\n\t/src/main.go:3 +0x1\n", "panic: boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.log")
			if err := os.WriteFile(path, []byte(tc.log), 0o644); err != nil {
				t.Fatal(err)
			}
			if got := lastLogError(path); got != tc.want {
				t.Errorf("lastLogError = %q, want %q", got, tc.want)
			}
		})
	}
}
