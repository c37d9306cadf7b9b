// Package kubesim writes kube-apiserver-shaped histories produced by a simulated, linearizable etcd, to
// benchmark and test the consistency checker without a cluster: deterministic for a seed, sized like a
// real run (a 10-minute run at 500 requests per second is about 300,000 operations and half a million
// watch events), with everything a checker must handle: creates and optimistic updates through
// transactions, paged lists pinned to a revision, watches with previous values and progress
// notifications, leases that are kept alive or expire, compaction, serializable reads from a lagging
// member, and requests that time out during fault windows and then take effect, or not.
//
// The simulated store is a small MVCC key-value store with etcd's semantics (revisions, versions, create
// revisions, leases, compaction); requests take effect at one instant between their call and return, in
// time order, so histories are linearizable by construction. Tests mutate them to make anomalies.
package kubesim

import (
	"errors"
	"slices"

	"github.com/google/btree"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

var (
	errCompacted = errors.New("etcdserver: mvcc: required revision has been compacted")
	errFutureRev = errors.New("etcdserver: mvcc: required revision is a future revision")
	errNoLease   = errors.New("etcdserver: requested lease not found")
)

// version is one version of a key, or its deletion.
type version struct {
	rev int64
	del bool
	kv  history.KV
}

type skey struct {
	name     string
	versions []version
}

func (k *skey) at(rev int64) *history.KV {
	lo, hi := 0, len(k.versions)
	for lo < hi {
		m := (lo + hi) / 2
		if k.versions[m].rev <= rev {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 || k.versions[lo-1].del {
		return nil
	}
	return &k.versions[lo-1].kv
}

func (k *skey) live() *history.KV {
	if n := len(k.versions); n > 0 && !k.versions[n-1].del {
		return &k.versions[n-1].kv
	}
	return nil
}

type slease struct {
	id     int64
	ttl    int64
	expiry int64 // virtual time
	keys   map[string]bool
}

// store is the simulated etcd: one linearizable MVCC store.
type store struct {
	rev        int64
	compactRev int64
	keys       *btree.BTreeG[*skey]
	leases     map[int64]*slease
	nextLease  int64
	// changes of the write being applied, for watchers.
	changes []history.Event
	// keepCompacted keeps deleted keys after compaction, for a simulated etcd that reads compacted
	// revisions (the compacted-read bug).
	keepCompacted bool
}

func newStore(keepCompacted bool) *store {
	return &store{rev: 1, keys: btree.NewG(32, func(a, b *skey) bool { return a.name < b.name }), leases: map[int64]*slease{}, nextLease: 0x7a00, keepCompacted: keepCompacted}
}

func (s *store) get(name string) *skey {
	k, _ := s.keys.Get(&skey{name: name})
	return k
}

// rangeAt answers a range request at revision rev (0: current).
func (s *store) rangeAt(r *history.Range, rev int64) (*history.RangeResponse, error) {
	if rev == 0 {
		rev = s.rev
	}
	if rev > s.rev {
		return nil, errFutureRev
	}
	if rev < s.compactRev {
		return nil, errCompacted
	}
	resp := &history.RangeResponse{}
	add := func(kv *history.KV) {
		resp.Count++
		if r.CountOnly || (r.Limit > 0 && int64(len(resp.KVs)) >= r.Limit) {
			return
		}
		out := *kv
		if r.KeysOnly {
			out.Value = history.Value{}
		}
		resp.KVs = append(resp.KVs, out)
	}
	if r.End == "" {
		if k := s.get(r.Key); k != nil {
			if kv := k.at(rev); kv != nil {
				add(kv)
			}
		}
	} else {
		s.keys.AscendGreaterOrEqual(&skey{name: r.Key}, func(k *skey) bool {
			if r.End != "\x00" && k.name >= r.End {
				return false
			}
			if kv := k.at(rev); kv != nil {
				add(kv)
			}
			return true
		})
	}
	resp.More = r.Limit > 0 && resp.Count > r.Limit
	return resp, nil
}

// apply runs a KV request (range, put, delete, txn) at the current revision, as etcd's applier does: all
// writes of one request share one new revision.
func (s *store) apply(req *history.Request) (*history.Response, error) {
	s.changes = s.changes[:0]
	if err := s.checkLeases(req); err != nil {
		return nil, err
	}
	next := s.rev + 1
	var resp *history.Response
	switch req.Kind {
	case history.KindTxn:
		ok := s.compares(req.Txn.Compares)
		branch := req.Txn.Else
		if ok {
			branch = req.Txn.Then
		}
		tr := &history.TxnResponse{Succeeded: ok}
		for i := range branch {
			r, err := s.one(&branch[i], next)
			if err != nil {
				return nil, err
			}
			tr.Results = append(tr.Results, *r)
		}
		resp = &history.Response{Txn: tr}
	default:
		r, err := s.one(req, next)
		if err != nil {
			return nil, err
		}
		resp = r
	}
	if len(s.changes) > 0 {
		s.rev = next
	}
	setRevision(resp, s.rev)
	return resp, nil
}

func setRevision(r *history.Response, rev int64) {
	r.Revision = rev
	if r.Txn != nil {
		for i := range r.Txn.Results {
			setRevision(&r.Txn.Results[i], rev)
		}
	}
}

func (s *store) checkLeases(req *history.Request) error {
	var check func(r *history.Request) error
	check = func(r *history.Request) error {
		switch r.Kind {
		case history.KindPut:
			if r.Put.Lease != 0 && s.leases[r.Put.Lease] == nil {
				return errNoLease
			}
		case history.KindTxn:
			branch := r.Txn.Else
			if s.compares(r.Txn.Compares) {
				branch = r.Txn.Then
			}
			for i := range branch {
				if err := check(&branch[i]); err != nil {
					return err
				}
			}
		}
		return nil
	}
	return check(req)
}

func (s *store) compares(cmps []history.Compare) bool {
	for _, c := range cmps {
		var kv *history.KV
		if k := s.get(c.Key); k != nil {
			kv = k.live()
		}
		var have int64
		if kv != nil {
			switch c.Target {
			case history.CompareModRevision:
				have = kv.ModRevision
			case history.CompareVersion:
				have = kv.Version
			case history.CompareCreate:
				have = kv.CreateRevision
			}
		}
		if c.Target == history.CompareValue {
			if kv == nil || !cmpOK(compareU(kv.Value.ID, c.Value.ID), c.Result) {
				return false
			}
			continue
		}
		if !cmpOK(compareI(have, c.Operand), c.Result) {
			return false
		}
	}
	return true
}

func compareI(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func compareU(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func cmpOK(c int, r history.CompareResult) bool {
	switch r {
	case history.Equal:
		return c == 0
	case history.NotEqual:
		return c != 0
	case history.Less:
		return c < 0
	case history.Greater:
		return c > 0
	}
	return false
}

// one applies one operation of a request; writes take revision next.
func (s *store) one(r *history.Request, next int64) (*history.Response, error) {
	switch r.Kind {
	case history.KindRange:
		rev := int64(0)
		if len(s.changes) > 0 {
			rev = next // a range after writes of the same transaction sees them
		}
		rr, err := s.rangeAtPending(r.Range, rev, next)
		if err != nil {
			return nil, err
		}
		return &history.Response{Range: rr}, nil
	case history.KindPut:
		p := r.Put
		k := s.get(p.Key)
		if k == nil {
			k = &skey{name: p.Key}
			s.keys.ReplaceOrInsert(k)
		}
		prev := k.live()
		kv := history.KV{Key: p.Key, Value: p.Value, ModRevision: next, CreateRevision: next, Version: 1, Lease: p.Lease}
		ev := history.Event{Type: history.EventPut, IsCreate: true}
		if prev != nil {
			kv.CreateRevision, kv.Version = prev.CreateRevision, prev.Version+1
			ev.IsCreate = false
			pc := *prev
			ev.PrevKV = &pc
			if prev.Lease != 0 && s.leases[prev.Lease] != nil {
				delete(s.leases[prev.Lease].keys, p.Key)
			}
		}
		if p.Lease != 0 {
			s.leases[p.Lease].keys[p.Key] = true
		}
		ev.KV = kv
		k.versions = append(k.versions, version{rev: next, kv: kv})
		s.changes = append(s.changes, ev)
		resp := &history.PutResponse{}
		if p.PrevKV && prev != nil {
			pc := *prev
			resp.PrevKV = &pc
		}
		return &history.Response{Put: resp}, nil
	case history.KindDelete:
		d := r.Delete
		dr := &history.DeleteResponse{}
		var victims []*skey
		visit := func(k *skey) bool {
			if d.End != "\x00" && d.End != "" && k.name >= d.End {
				return false
			}
			if k.live() != nil {
				victims = append(victims, k)
			}
			return d.End != ""
		}
		s.keys.AscendGreaterOrEqual(&skey{name: d.Key}, func(k *skey) bool {
			if d.End == "" && k.name != d.Key {
				return false
			}
			return visit(k)
		})
		for _, k := range victims {
			s.deleteKey(k, next)
			dr.Deleted++
			if d.PrevKV {
				dr.PrevKVs = append(dr.PrevKVs, *s.changes[len(s.changes)-1].PrevKV)
			}
		}
		return &history.Response{Delete: dr}, nil
	}
	return nil, errors.New("unsupported request " + string(r.Kind))
}

func (s *store) rangeAtPending(r *history.Range, rev, next int64) (*history.RangeResponse, error) {
	if rev == next {
		// Reads inside a writing transaction see the transaction's writes: temporarily count the new
		// revision as current.
		s.rev = next
		defer func() { s.rev = next - 1 }()
	}
	return s.rangeAt(r, rev)
}

func (s *store) deleteKey(k *skey, rev int64) {
	prev := *k.live()
	if prev.Lease != 0 && s.leases[prev.Lease] != nil {
		delete(s.leases[prev.Lease].keys, k.name)
	}
	k.versions = append(k.versions, version{rev: rev, del: true, kv: history.KV{Key: k.name, ModRevision: rev}})
	s.changes = append(s.changes, history.Event{Type: history.EventDelete, KV: history.KV{Key: k.name, ModRevision: rev}, PrevKV: &prev})
}

// revoke deletes a lease and its keys in one revision.
func (s *store) revoke(id int64) error {
	s.changes = s.changes[:0]
	l := s.leases[id]
	if l == nil {
		return errNoLease
	}
	var names []string
	for name := range l.keys {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		s.deleteKey(s.get(name), s.rev+1)
	}
	delete(s.leases, id)
	if len(s.changes) > 0 {
		s.rev++
	}
	return nil
}

func (s *store) compact(rev int64) error {
	if rev <= s.compactRev {
		return errCompacted
	}
	if rev > s.rev {
		return errFutureRev
	}
	s.compactRev = rev
	if !s.keepCompacted {
		// A key whose last version is a deletion at or below the compacted revision is invisible at every
		// revision still readable: forget it, as etcd's compaction does, so that ranges over a prefix of
		// short-lived keys (events) cost what is alive, not everything ever written.
		var dead []*skey
		s.keys.Ascend(func(k *skey) bool {
			if n := len(k.versions); n > 0 && k.versions[n-1].del && k.versions[n-1].rev <= rev {
				dead = append(dead, k)
			}
			return true
		})
		for _, k := range dead {
			s.keys.Delete(k)
		}
	}
	return nil
}
