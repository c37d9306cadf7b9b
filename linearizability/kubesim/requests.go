package kubesim

// The requests kube-apiserver's storage layer sends to etcd, shared by the main load and the components.

import "github.com/etcd-chaosbench/chaosbench/results/history"

// known is the mod revision a controller believes a key has: the current one, or now and then an older
// one (a watch cache lagging behind), which makes the update's compare fail.
func (s *sim) known(key string) int64 {
	k := s.st.get(key)
	if k == nil || k.live() == nil {
		return 0
	}
	if n := len(k.versions); n > 1 && s.rng.IntN(10) == 0 {
		return k.versions[n-2].rev
	}
	return k.live().ModRevision
}

// put is a plain put, with a lease or none (0).
func put(key string, v history.Value, lease int64) history.Request {
	return history.Request{Kind: history.KindPut, Put: &history.Put{Key: key, Value: v, Lease: lease}}
}

// get is a linearizable read of one key.
func get(key string) history.Request {
	return history.Request{Kind: history.KindRange, Range: &history.Range{Key: key}}
}

// guaranteedUpdate is kube-apiserver's update: compare the mod revision it knows, else read the key.
func guaranteedUpdate(key string, known int64, then history.Request) history.Request {
	return history.Request{Kind: history.KindTxn, Txn: &history.Txn{
		Compares: []history.Compare{{Key: key, Target: history.CompareModRevision, Result: history.Equal, Operand: known}},
		Then:     []history.Request{then}, Else: []history.Request{get(key)}}}
}

// create is kube-apiserver's create: put only if the key does not exist (mod revision 0).
func create(key string, then history.Request) history.Request {
	return history.Request{Kind: history.KindTxn, Txn: &history.Txn{
		Compares: []history.Compare{{Key: key, Target: history.CompareModRevision, Result: history.Equal, Operand: 0}},
		Then:     []history.Request{then}}}
}
