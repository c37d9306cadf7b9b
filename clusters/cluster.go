// Package clusters provides the etcd clusters chaosbench runs against, behind one small interface:
//
//   - embed (the default): 1, 3 or 5 members, each a real OS process. The chaosbench binary re-executes
//     itself in a hidden "member" mode that runs the etcd server linked into it, so nothing needs to be
//     installed. Peer traffic flows through a per-member proxy (package proxy) that faults can control.
//   - external: an existing cluster reached through its client endpoints, optionally with mutual TLS.
//
// A Cluster exposes its members and a few cluster-wide operations. What can be done to a member beyond
// talking to it depends on the backend and is found by type assertion: a Process can be killed, stopped,
// paused and restarted; members of an external cluster are only names and URLs.
package clusters

import (
	"context"
	"crypto/tls"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Cluster is an etcd cluster under test.
type Cluster interface {
	// Backend names the kind of cluster: "embed", "external", ...
	Backend() string
	// Members returns the cluster's members in a stable order.
	Members() []Member
	// Endpoints returns the client URLs workloads connect to.
	Endpoints() []string
	// TLS returns the client TLS configuration, or nil for plaintext.
	TLS() *tls.Config
	// Leader looks up the current leader, asking the members now.
	Leader(ctx context.Context) (Member, error)
	// WaitHealthy returns once every running member serves linearizable reads and they agree on a leader,
	// or with an error when ctx ends first.
	WaitHealthy(ctx context.Context) error
	// Close stops what the cluster started and releases its resources. It is safe to call more than once.
	Close(ctx context.Context) error
}

// Member is an etcd member as a client sees it.
type Member interface {
	// Name is the member's name (m1, m2, ... for clusters chaosbench starts).
	Name() string
	// ID is the member's raft id, or 0 while it is not known yet.
	ID() uint64
	// ClientURL is the URL clients use to reach the member.
	ClientURL() string
	// PeerURL is the URL other members use to reach it (its proxy, for embedded clusters).
	PeerURL() string
}

// MetricsURL returns the URL of m's Prometheus metrics: the separate metrics listener of a member chaosbench
// runs, the client URL (which serves /metrics too) of the others; "" for a member with neither (a learner, a
// member not started yet).
func MetricsURL(m Member) string {
	base := m.ClientURL()
	if p, ok := m.(Process); ok && p.MetricsURL() != "" {
		base = p.MetricsURL()
	}
	if base == "" {
		return ""
	}
	return strings.TrimSuffix(base, "/") + "/metrics"
}

// Process is a member whose process chaosbench controls: the fault injector's handle on it.
type Process interface {
	Member
	// DataDir is the member's data directory.
	DataDir() string
	// MetricsURL is where the member serves /metrics and /health.
	MetricsURL() string
	// PID returns the process id, or 0 when the member is not running.
	PID() int
	// Running reports whether the process is alive (paused counts as running).
	Running() bool
	// Paused reports whether the process is stopped with SIGSTOP.
	Paused() bool
	// Kill sends SIGKILL and waits for the process to exit.
	Kill(ctx context.Context) error
	// Stop sends SIGTERM (after SIGCONT if paused) and waits for a graceful exit, killing the process if it
	// does not exit within ctx or 10 seconds.
	Stop(ctx context.Context) error
	// Start starts the member on its existing data directory, ports and flags.
	Start(ctx context.Context) error
	// Restart stops the member gracefully and starts it again.
	Restart(ctx context.Context) error
	// Pause sends SIGSTOP.
	Pause(ctx context.Context) error
	// Resume sends SIGCONT.
	Resume(ctx context.Context) error
}

// Processes returns the members of c that chaosbench controls as processes (none for an external
// cluster).
func Processes(c Cluster) []Process {
	var out []Process
	for _, m := range c.Members() {
		if p, ok := m.(Process); ok {
			out = append(out, p)
		}
	}
	return out
}

// clientConfig is a client configuration for c's endpoints, logged in as nobody (see ClientConfig).
func clientConfig(c Cluster) clientv3.Config {
	return clientv3.Config{
		Endpoints:            c.Endpoints(),
		TLS:                  c.TLS(),
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
	}
}
