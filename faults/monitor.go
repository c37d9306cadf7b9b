package faults

import (
	"context"
	"net/url"
	"strconv"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/etcd-chaosbench/chaosbench/clusters"
)

// observation is the leader as the members reported it at offset at: the leader named in the highest raft
// term any member reported ("" when none named one).
type observation struct {
	at     time.Duration
	leader string
	term   uint64
}

// monitor polls every member's status and keeps the leader's history (changes only), from which each
// window's election time and leader changes are computed. It keeps one gRPC connection per member, with
// a short reconnect backoff so that a restarted member is seen again within a poll or two.
type monitor struct {
	c        clusters.Cluster
	base     time.Time
	interval time.Duration

	mu    sync.Mutex
	obs   []observation
	names map[uint64]string // raft id -> member name, learned from the answers
	conns map[string]*grpc.ClientConn

	stop chan struct{}
	done chan struct{}
}

func startMonitor(c clusters.Cluster, base time.Time, interval time.Duration) *monitor {
	m := &monitor{c: c, base: base, interval: interval, names: map[uint64]string{}, conns: map[string]*grpc.ClientConn{},
		stop: make(chan struct{}), done: make(chan struct{})}
	go m.run()
	return m
}

func (m *monitor) run() {
	defer close(m.done)
	for {
		start := time.Now()
		m.poll()
		wait := m.interval - time.Since(start)
		select {
		case <-m.stop:
			return
		case <-time.After(max(wait, 10*time.Millisecond)):
		}
	}
}

func (m *monitor) close() {
	close(m.stop)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.conns {
		c.Close()
	}
}

func (m *monitor) conn(member clusters.Member) *grpc.ClientConn {
	m.mu.Lock()
	defer m.mu.Unlock()
	if c, ok := m.conns[member.Name()]; ok {
		return c
	}
	u, err := url.Parse(member.ClientURL())
	if err != nil {
		return nil
	}
	creds := insecure.NewCredentials()
	if cfg := m.c.TLS(); cfg != nil {
		creds = credentials.NewTLS(cfg)
	}
	bc := backoff.DefaultConfig
	bc.BaseDelay, bc.MaxDelay = 50*time.Millisecond, 200*time.Millisecond
	opts := append([]grpc.DialOption{grpc.WithTransportCredentials(creds),
		grpc.WithConnectParams(grpc.ConnectParams{Backoff: bc, MinConnectTimeout: 500 * time.Millisecond})},
		clusters.MemberDialOptions(m.c, u.Host)...) // etcd 3.6 wants a user for Status when auth is on
	c, err := grpc.NewClient(u.Host, opts...)
	if err != nil {
		return nil
	}
	m.conns[member.Name()] = c
	return c
}

// poll asks every member for its status at once and records the leader if it changed.
func (m *monitor) poll() {
	members := m.c.Members()
	resps := make([]*pb.StatusResponse, len(members))
	var wg sync.WaitGroup
	for i, member := range members {
		conn := m.conn(member)
		if conn == nil {
			continue
		}
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			if r, err := pb.NewMaintenanceClient(conn).Status(ctx, &pb.StatusRequest{}); err == nil {
				resps[i] = r
			}
		})
	}
	wg.Wait()
	at := time.Since(m.base)
	m.mu.Lock()
	defer m.mu.Unlock()
	var best *pb.StatusResponse
	for i, r := range resps {
		if r == nil {
			continue
		}
		m.names[r.Header.MemberId] = members[i].Name()
		if r.Leader != 0 && (best == nil || r.RaftTerm > best.RaftTerm) {
			best = r
		}
	}
	o := observation{at: at}
	if best != nil {
		o.term = best.RaftTerm
		o.leader = m.names[best.Leader]
		if o.leader == "" {
			o.leader = strconv.FormatUint(best.Leader, 16)
		}
	}
	if n := len(m.obs); n > 0 && m.obs[n-1].leader == o.leader && m.obs[n-1].term == o.term {
		return
	}
	m.obs = append(m.obs, o)
}

// at returns the observation in force at offset t.
func (m *monitor) at(t time.Duration) observation {
	m.mu.Lock()
	defer m.mu.Unlock()
	var cur observation
	for _, o := range m.obs {
		if o.at > t {
			break
		}
		cur = o
	}
	return cur
}

// elections returns, for the window [start, end]: the time from start to the first leader other than the
// one in office at start (or the same member in a later term), that leader, and how many elections were
// observed.
func (m *monitor) elections(start, end time.Duration) (first time.Duration, leader string, changes int) {
	base := m.at(start)
	m.mu.Lock()
	defer m.mu.Unlock()
	first = -1
	prev := base
	for _, o := range m.obs {
		if o.at <= start || o.at > end || o.leader == "" {
			continue
		}
		if o.leader == prev.leader && o.term == prev.term {
			continue
		}
		changes++
		if first < 0 && (o.leader != base.leader || o.term > base.term) {
			first, leader = o.at-start, o.leader
		}
		prev = o
	}
	return first, leader, changes
}
