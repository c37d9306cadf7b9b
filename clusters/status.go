package clusters

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// probeTimeout bounds each status or health probe of one member: a paused or partitioned member must not
// hold up a leader lookup.
const probeTimeout = 2 * time.Second

// statusClient asks members about themselves: Maintenance.Status over gRPC and /health over HTTP. Every
// probe uses a fresh connection, so that a member that was killed and restarted is seen at once rather
// than after gRPC's reconnect backoff.
type statusClient struct {
	tls  *tls.Config
	http *http.Client
	// auth logs the status calls in, once the cluster has authentication on (etcd 3.6 asks for a user).
	auth atomic.Pointer[Auth]
}

func (s *statusClient) setAuth(a *Auth) { s.auth.Store(a) }

// dialOptions are the options of a connection to the member at addr.
func (s *statusClient) dialOptions(addr string) []grpc.DialOption {
	creds := insecure.NewCredentials()
	if s.tls != nil {
		creds = credentials.NewTLS(s.tls)
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if a := s.auth.Load(); a != nil {
		opts = append(opts, a.dialOption(addr))
	}
	return opts
}

func newStatusClient(tlsConfig *tls.Config) *statusClient {
	return &statusClient{
		tls: tlsConfig,
		http: &http.Client{
			Timeout:   probeTimeout,
			Transport: &http.Transport{TLSClientConfig: tlsConfig, DisableKeepAlives: true},
		},
	}
}

func (s *statusClient) close() { s.http.CloseIdleConnections() }

// Status returns the member's Maintenance.Status answer.
func (s *statusClient) Status(ctx context.Context, m Member) (*pb.StatusResponse, error) {
	u, err := url.Parse(m.ClientURL())
	if err != nil {
		return nil, fmt.Errorf("status of %s: %w", m.Name(), err)
	}
	conn, err := grpc.NewClient(u.Host, s.dialOptions(u.Host)...)
	if err != nil {
		return nil, fmt.Errorf("status of %s: %w", m.Name(), err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	resp, err := pb.NewMaintenanceClient(conn).Status(ctx, &pb.StatusRequest{})
	if err != nil {
		return nil, fmt.Errorf("status of %s: %w", m.Name(), err)
	}
	if setter, ok := m.(interface{ setID(uint64) }); ok {
		setter.setID(resp.Header.MemberId)
	}
	return resp, nil
}

// health checks the member's /health endpoint, which etcd answers with {"health":"true"} only when the
// member has a leader, no alarm, and can serve a linearizable read.
func (s *statusClient) health(ctx context.Context, m Member) error {
	base := m.ClientURL()
	if p, ok := m.(Process); ok {
		base = p.MetricsURL()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(base, "/")+"/health", nil)
	if err != nil {
		return fmt.Errorf("health of %s: %w", m.Name(), err)
	}
	resp, err := s.http.Do(req)
	if err != nil {
		return fmt.Errorf("health of %s: %w", m.Name(), err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	var h struct {
		Health string `json:"health"`
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(body, &h); err != nil || h.Health != "true" {
		return fmt.Errorf("health of %s: %s %s", m.Name(), resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// leader asks every member for its status concurrently and returns the leader reported in the highest
// raft term: after a partition heals, a stale member may still name the old leader for a moment.
func (s *statusClient) leader(ctx context.Context, members []Member) (Member, error) {
	resps := make([]*pb.StatusResponse, len(members))
	errs := make([]error, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resps[i], errs[i] = s.Status(ctx, m)
		}()
	}
	wg.Wait()
	var best *pb.StatusResponse
	for _, r := range resps {
		if r != nil && r.Leader != 0 && (best == nil || r.RaftTerm > best.RaftTerm) {
			best = r
		}
	}
	if best == nil {
		if err := errors.Join(errs...); err != nil {
			return nil, fmt.Errorf("find leader: no member names one: %w", err)
		}
		return nil, errors.New("find leader: no member names one")
	}
	for _, m := range members {
		if m.ID() == best.Leader {
			return m, nil
		}
	}
	return nil, fmt.Errorf("find leader: leader %x is not among the members asked", best.Leader)
}

// waitHealthy polls until every member is healthy and all name the same leader.
func (s *statusClient) waitHealthy(ctx context.Context, members func() []Member) error {
	// The members are asked for again on every try: a member down when the wait began (a failpoint's
	// panic, a kill whose window just ended) is being started again, and the wait is for the cluster it
	// rejoins. No member running is a state to wait out, not an answer: failing at once would report a
	// window "not recovered within" the bound without having waited at all.
	var last error
	for {
		if ms := members(); len(ms) == 0 {
			last = errors.New("no member is running")
		} else if last = s.healthyOnce(ctx, ms); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster not healthy: %w", last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (s *statusClient) healthyOnce(ctx context.Context, members []Member) error {
	errs := make([]error, len(members))
	leaders := make([]uint64, len(members))
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := s.Status(ctx, m)
			if err != nil {
				errs[i] = err
				return
			}
			leaders[i] = st.Leader
			errs[i] = s.health(ctx, m)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	for i := range leaders {
		if leaders[i] == 0 || leaders[i] != leaders[0] {
			return fmt.Errorf("members disagree on the leader: %x", leaders)
		}
	}
	return nil
}
