package clusters

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// ExternalOptions locates an existing cluster.
type ExternalOptions struct {
	// Endpoints are read as etcdctl reads --endpoints: host:port, http(s)://host:port, unix://path, each
	// entry possibly a comma-separated list (see ParseEndpoints).
	Endpoints []string
	// CACert, Cert and Key are PEM files for (mutual) TLS; all empty means plaintext.
	CACert, Cert, Key string
	// User, when set, is who every client logs in as (the load's, the faults' and the checks'), as
	// etcdctl's --user: a cluster with authentication enabled.
	User *Credentials
	// ConnectTimeout bounds the first contact (default 5 s).
	ConnectTimeout time.Duration
}

// External is an existing cluster chaosbench only talks to: it cannot kill, pause or restart its members.
type External struct {
	endpoints []string
	tls       *tls.Config
	members   []Member
	status    *statusClient
	auth      *Auth
}

var _ Cluster = (*External)(nil)

func (c *External) authInfo() *Auth { return c.auth }

type externalMember struct {
	name      string
	id        uint64
	clientURL string
	peerURL   string
}

func (m *externalMember) Name() string      { return m.name }
func (m *externalMember) ID() uint64        { return m.id }
func (m *externalMember) ClientURL() string { return m.clientURL }
func (m *externalMember) PeerURL() string   { return m.peerURL }

// ConnectExternal checks the endpoints and TLS files, contacts the cluster and lists its members. Bad
// endpoints, unreadable certificates and an unreachable cluster are usage errors: nothing has started.
// As with etcdctl, TLS files make bare host:port endpoints https, and explicit http:// endpoints leave
// them unused.
func ConnectExternal(ctx context.Context, opts ExternalOptions) (*External, error) {
	if len(opts.Endpoints) == 0 {
		return nil, outcome.Usagef("--cluster external needs --endpoints")
	}
	useTLS := opts.CACert != "" || opts.Cert != "" || opts.Key != ""
	endpoints, speaksTLS, err := parseEndpoints(opts.Endpoints, useTLS)
	if err != nil {
		return nil, outcome.Usagef("--endpoints %w", err)
	}
	var tlsConfig *tls.Config
	if useTLS {
		if (opts.Cert == "") != (opts.Key == "") {
			return nil, outcome.Usagef("--cert and --key go together")
		}
		info := transport.TLSInfo{CertFile: opts.Cert, KeyFile: opts.Key, TrustedCAFile: opts.CACert}
		if tlsConfig, err = info.ClientConfig(); err != nil {
			return nil, outcome.Usagef("TLS files: %v", err)
		}
	}
	// The probes must speak what the etcd client speaks to the endpoints.
	switch {
	case !speaksTLS:
		// Explicit http:// endpoints: the client leaves TLS files unused, as etcdctl does.
		tlsConfig = nil
	case tlsConfig == nil:
		// https:// without TLS files: the client verifies the servers against the system's CAs.
		tlsConfig = &tls.Config{}
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = 5 * time.Second
	}
	c := &External{endpoints: endpoints, tls: tlsConfig, status: newStatusClient(tlsConfig)}
	if opts.User != nil {
		c.auth = newAuth(*opts.User, *opts.User)
		c.status.setAuth(c.auth)
	}

	cfg := ClientConfig(c)
	cfg.Logger = zap.NewNop()
	cli, err := clientv3.New(cfg)
	if err != nil {
		// The client logs in as it connects: refused credentials end here, before anything starts.
		if opts.User != nil && isAuthRefused(err) {
			return nil, outcome.Usagef("--user %s: etcd at %s refused the credentials: %v", opts.User.User, strings.Join(endpoints, ","), rpctypes.Error(err))
		}
		return nil, outcome.Usagef("connect to %s: %v", strings.Join(endpoints, ","), err)
	}
	defer cli.Close()
	lctx, cancel := context.WithTimeout(ctx, opts.ConnectTimeout)
	defer cancel()
	list, err := cli.MemberList(lctx)
	if err != nil {
		if errors.Is(err, context.Canceled) && ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if isAuthRefused(err) {
			if opts.User == nil {
				return nil, outcome.Usagef("etcd at %s has authentication enabled: give --user name[:password] (and --password-file): %v", strings.Join(endpoints, ","), rpctypes.Error(err))
			}
			return nil, outcome.Usagef("--user %s: etcd at %s refused the request: %v", opts.User.User, strings.Join(endpoints, ","), rpctypes.Error(err))
		}
		return nil, outcome.Usagef("cannot reach etcd at %s: %v", strings.Join(endpoints, ","), err)
	}
	if opts.User == nil {
		// Listing members needs no login; reading does: a cluster with authentication on is found here,
		// not by the load's first request.
		if _, err := cli.Get(lctx, "\x00", clientv3.WithCountOnly()); isAuthRefused(err) {
			return nil, outcome.Usagef("etcd at %s has authentication enabled: give --user name[:password] (or name with --password-file): %v", strings.Join(endpoints, ","), rpctypes.Error(err))
		}
	}
	for _, m := range list.Members {
		em := &externalMember{name: m.Name, id: m.ID, clientURL: probeURL(m.ClientURLs)}
		if len(m.PeerURLs) > 0 {
			em.peerURL = m.PeerURLs[0]
		}
		if em.name == "" {
			em.name = fmt.Sprintf("%x", m.ID)
		}
		if em.clientURL == "" && len(m.ClientURLs) > 0 {
			// Health, status and metrics probes go to each member over http(s), whatever the load uses.
			return nil, outcome.Usagef("member %s advertises no http(s) client URL (%s): chaosbench probes every member over http(s)",
				em.name, strings.Join(m.ClientURLs, ","))
		}
		c.members = append(c.members, em)
	}
	return c, nil
}

// isAuthRefused reports whether err is etcd refusing who the client is (or that it is nobody).
func isAuthRefused(err error) bool {
	err = rpctypes.Error(err)
	for _, e := range []error{rpctypes.ErrAuthFailed, rpctypes.ErrUserEmpty, rpctypes.ErrPermissionDenied,
		rpctypes.ErrUserNotFound, rpctypes.ErrInvalidAuthToken, rpctypes.ErrInvalidAuthMgmt} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// probeURL returns the first http(s) URL a member advertises for clients, or "". Members may also
// advertise unix sockets, which the load can use but the probes (plain HTTP and gRPC over TCP) cannot.
func probeURL(clientURLs []string) string {
	for _, u := range clientURLs {
		if strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://") {
			return u
		}
	}
	return ""
}

// Backend returns "external".
func (c *External) Backend() string { return "external" }

// Members returns the members listed by the cluster; none is a Process.
func (c *External) Members() []Member { return c.members }

// Endpoints returns the endpoints given by the user, as URLs (see ParseEndpoints).
func (c *External) Endpoints() []string { return c.endpoints }

// TLS returns the client TLS configuration, or nil.
func (c *External) TLS() *tls.Config { return c.tls }

// Leader asks every member for its status and returns the leader of the highest term seen.
func (c *External) Leader(ctx context.Context) (Member, error) {
	return c.status.leader(ctx, c.reachable())
}

// WaitHealthy waits until every listed member is healthy and all agree on one leader.
func (c *External) WaitHealthy(ctx context.Context) error {
	return c.status.waitHealthy(ctx, c.reachable)
}

// reachable returns the members that advertise a client URL (learners and unstarted members do not).
func (c *External) reachable() []Member {
	var out []Member
	for _, m := range c.members {
		if m.ClientURL() != "" {
			out = append(out, m)
		}
	}
	return out
}

// Close releases idle connections; the cluster itself is left as it was.
func (c *External) Close(context.Context) error {
	c.status.close()
	return nil
}
