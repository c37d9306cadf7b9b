package kube

import (
	"context"
	"sync"
	"time"

	"github.com/etcd-chaosbench/chaosbench/results/history"
	"github.com/etcd-chaosbench/chaosbench/workloads"
)

// Lease reuse limits of kube-apiserver's lease manager (storage/etcd3/lease_manager.go).
const (
	leaseReuseMax      = 60 * time.Second
	leaseReuseFraction = 0.05
	leaseMaxObjects    = 1000
)

// leaseManager hands out leases for TTL'd objects as kube-apiserver's does: one Grant(ttl + reuse) serves
// every object created within the reuse period (5% of the TTL, at most 60 s) up to 1000 objects, so that an
// events flood costs a handful of grants instead of one per event, and revoking a lease never deletes more
// than 1000 keys.
type leaseManager struct {
	op  string
	ttl time.Duration
	now func() time.Duration

	mu       sync.Mutex
	id       int64
	expires  time.Duration // when the current lease expires
	attached int
	grants   int
}

func newLeaseManager(op string, ttl time.Duration, now func() time.Duration) *leaseManager {
	return &leaseManager{op: op, ttl: ttl, now: now}
}

func (m *leaseManager) reuse() time.Duration {
	return min(time.Duration(leaseReuseFraction*float64(m.ttl)), leaseReuseMax)
}

// lease returns a lease for an object that must live for the manager's TTL, granting a new one through c
// when the current lease would expire too soon or carries 1000 objects already. The grant is sent under the
// lock, as the apiserver's is: concurrent creators wait for it rather than granting leases of their own.
func (m *leaseManager) lease(ctx context.Context, c *workloads.Client) (int64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	valid := now+m.ttl < m.expires
	sufficient := now+m.ttl+m.reuse() >= m.expires
	if m.id != 0 && valid && sufficient && m.attached < leaseMaxObjects {
		m.attached++
		return m.id, nil
	}
	ttl := m.ttl + m.reuse()
	resp, err := c.Do(ctx, nil, m.op, history.Request{Kind: history.KindLeaseGrant, Lease: &history.Lease{TTL: int64(ttl.Seconds())}})
	if err != nil {
		return 0, err
	}
	m.grants++
	m.id, m.expires, m.attached = resp.Lease.ID, now+time.Duration(resp.Lease.TTL)*time.Second, 1
	return m.id, nil
}

// granted returns the number of leases granted so far.
func (m *leaseManager) granted() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.grants
}
