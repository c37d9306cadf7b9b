package kubesim

// The cluster's components that talk to etcd on schedules of their own: kubelets' node leases, the
// scheduler's leader election, the apiservers' endpoint leases and health checks, the lease events share,
// the storage object counter and the compactor. Each reschedules itself until the end of the load.

import (
	"fmt"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// nodeLease is a kubelet renewing its node lease every 10 s.
func (s *sim) nodeLease(i int) {
	if s.now >= s.end {
		return
	}
	key := fmt.Sprintf("/registry/leases/kube-node-lease/node-%03d", i)
	v := s.value(s.nextClient, 400)
	if known := s.known(key); known == 0 {
		s.send("create/leases", create(key, put(key, v, 0)), nil)
	} else {
		s.send("update/leases", guaranteedUpdate(key, known, put(key, v, 0)), nil)
	}
	s.at(s.now+10*sec, func() { s.nodeLease(i) })
}

// leaderElection is the scheduler's leader renewing its lease every 2 s and two standbys reading it.
func (s *sim) leaderElection() {
	if s.now >= s.end {
		return
	}
	key := "/registry/leases/kube-system/kube-scheduler"
	v := s.value(s.nextClient, 450)
	if known := s.known(key); known == 0 {
		s.send("create/leases", create(key, put(key, v, 0)), nil)
	} else {
		s.send("update/leases", guaranteedUpdate(key, known, put(key, v, 0)), nil)
	}
	for range 2 {
		s.send("get/leases", get(key), nil)
	}
	s.at(s.now+2*sec, s.leaderElection)
}

// masterLease is an apiserver's endpoint lease: a fresh 15 s lease every 10 s, attached by an update.
// When an update fails the old lease expires and takes the key with it.
func (s *sim) masterLease(i int) {
	if s.now >= s.end {
		return
	}
	key := fmt.Sprintf("/registry/masterleases/10.0.0.%d", i+1)
	s.send("grant/masterleases", history.Request{Kind: history.KindLeaseGrant, Lease: &history.Lease{TTL: 15}}, func(resp *history.Response, err error) {
		if err != nil {
			return
		}
		v := s.value(s.nextClient, 64)
		if known := s.known(key); known == 0 {
			s.send("create/masterleases", create(key, put(key, v, resp.Lease.ID)), nil)
		} else {
			s.send("update/masterleases", guaranteedUpdate(key, known, put(key, v, resp.Lease.ID)), nil)
		}
	})
	s.at(s.now+10*sec, func() { s.masterLease(i) })
}

// eventLease is the lease events share: TTL 1 hour, granted anew every 3 minutes.
func (s *sim) eventLease() {
	if s.now >= s.end {
		return
	}
	s.send("grant/events", history.Request{Kind: history.KindLeaseGrant, Lease: &history.Lease{TTL: 3660}}, func(resp *history.Response, err error) {
		if err == nil {
			s.eventLse = resp.Lease.ID
		}
	})
	s.at(s.now+180*sec, s.eventLease)
}

// health is an apiserver's etcd health check, once a second.
func (s *sim) health(i int) {
	if s.now >= s.end {
		return
	}
	s.send("get/health", get("/registry/health"), nil)
	s.at(s.now+sec, func() { s.health(i) })
}

// counter counts every resource once a minute, as kube-apiserver's storage metrics do.
func (s *sim) counter() {
	if s.now >= s.end {
		return
	}
	for _, p := range []string{"/registry/pods/", "/registry/events/", "/registry/leases/", "/registry/configmaps/"} {
		s.send("count", history.Request{Kind: history.KindRange, Range: &history.Range{Key: p, End: prefixEnd(p), CountOnly: true}}, nil)
	}
	s.at(s.now+30*sec, s.counter)
}

// compactor is kube-apiserver's compaction: win the compact_rev_key transaction, then compact to the
// revision seen one interval earlier.
func (s *sim) compactor() {
	if s.now >= s.end {
		return
	}
	key := "compact_rev_key"
	var version int64
	if k := s.st.get(key); k != nil && k.live() != nil {
		version = k.live().Version
	}
	target := s.compactPrev
	s.compactPrev = s.st.rev
	txn := history.Request{Kind: history.KindTxn, Txn: &history.Txn{
		Compares: []history.Compare{{Key: key, Target: history.CompareVersion, Result: history.Equal, Operand: version}},
		Then:     []history.Request{put(key, s.value(s.nextClient, 16), 0)}, Else: []history.Request{get(key)}}}
	s.send("compact/txn", txn, func(resp *history.Response, err error) {
		if err != nil || !resp.Txn.Succeeded || target == 0 {
			return
		}
		s.send("compact", history.Request{Kind: history.KindCompact, Compact: &history.Compact{Revision: target}}, func(_ *history.Response, err error) {
			if err == nil && target > 2 && s.bug("compacted-read", 1) {
				// A read below the compaction just acknowledged: etcd must refuse it.
				r := history.Request{Kind: history.KindRange, Range: &history.Range{Key: "/registry/pods/", End: prefixEnd("/registry/pods/"), Limit: 10, Revision: target - 1}}
				s.at(s.now+ms, func() { s.send("list/pods", r, nil) })
			}
		})
	})
	s.at(s.now+int64(s.o.CompactEvery), s.compactor)
}
