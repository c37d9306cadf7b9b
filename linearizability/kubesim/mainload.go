package kubesim

// The main load: the open-loop stream of requests the apiservers send for users and controllers (pods,
// events, lists, config maps), in the mix mainTick draws. The pods it keeps track of are the ones it
// believes exist, which is what makes its updates and deletes hit keys that are there.

import (
	"fmt"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// mainTick sends the next request of the open-loop main load.
func (s *sim) mainTick() {
	if s.now >= s.end {
		return
	}
	s.at(s.now+int64(float64(sec)/s.o.Rate), s.mainTick)
	x := s.rng.Float64() * 100
	switch {
	case x < 15:
		s.podGet()
	case x < 27:
		s.podCreate()
	case x < 49:
		s.podUpdate()
	case x < 57:
		s.podDelete()
	case x < 69:
		s.eventCreate()
	case x < 69.2:
		s.list("/registry/pods/", 500, "list/pods", 0, true)
	case x < 71.2:
		s.cacheList()
	case x < 75.2:
		s.serializableGet()
	case x < 75.22:
		s.list("/registry/events/", 500, "list/events", 0, false)
	case x < 76.22:
		s.keysOnly()
	case x < 85.22:
		s.configMap()
	default:
		s.podGet()
	}
}

// podName names a new pod, spread over the namespaces: a name of its own, or with Names the next of them
// no pod holds.
func (s *sim) podName() string {
	for {
		s.podSeq++
		n := s.podSeq
		if s.o.Names > 0 {
			n %= s.o.Names
		}
		name := fmt.Sprintf("/registry/pods/ns-%d/pod-%05d", n%s.o.Namespaces, n)
		if _, held := s.podIndex[name]; !held {
			return name
		}
	}
}

// randomPod picks a pod the load believes exists, or "" when there is none.
func (s *sim) randomPod() string {
	if len(s.pods) == 0 {
		return ""
	}
	return s.pods[s.rng.IntN(len(s.pods))]
}

// addPod and removePod keep the pods the load believes exist, with their indexes for removal in
// constant time.
func (s *sim) addPod(name string) {
	if _, ok := s.podIndex[name]; !ok {
		s.podIndex[name] = len(s.pods)
		s.pods = append(s.pods, name)
	}
}

func (s *sim) removePod(name string) {
	i, ok := s.podIndex[name]
	if !ok {
		return
	}
	last := s.pods[len(s.pods)-1]
	s.pods[i] = last
	s.podIndex[last] = i
	s.pods = s.pods[:len(s.pods)-1]
	delete(s.podIndex, name)
}

// podGet reads one pod (limit 1), or a key that does not exist while there are no pods.
func (s *sim) podGet() {
	key := s.randomPod()
	if key == "" {
		key = "/registry/pods/ns-0/missing"
	}
	r := get(key)
	r.Range.Limit = 1
	s.send("get/pods", r, nil)
}

// podCreate creates a pod, or updates one once the load has as many as it keeps.
func (s *sim) podCreate() {
	if len(s.pods) >= s.o.Pods {
		s.podUpdate()
		return
	}
	key := s.podName()
	s.send("create/pods", create(key, put(key, s.value(s.nextClient, 2048), 0)), nil)
	s.addPod(key)
}

// podUpdate updates a pod through kube-apiserver's optimistic update.
func (s *sim) podUpdate() {
	key := s.randomPod()
	if key == "" {
		s.podCreate()
		return
	}
	s.send("update/pods", guaranteedUpdate(key, s.known(key), put(key, s.value(s.nextClient, 2048+s.rng.IntN(512)), 0)), nil)
}

// podDelete deletes a pod through an optimistic update, while more than half of the pods remain.
func (s *sim) podDelete() {
	if len(s.pods) < s.o.Pods/2 {
		s.podCreate()
		return
	}
	key := s.randomPod()
	s.removePod(key)
	del := history.Request{Kind: history.KindDelete, Delete: &history.Delete{Key: key}}
	s.send("delete/pods", guaranteedUpdate(key, s.known(key), del), nil)
}

// eventCreate creates an event attached to the lease events share, once it is granted.
func (s *sim) eventCreate() {
	if s.eventLse == 0 {
		return
	}
	s.eventSeq++
	n := s.eventSeq
	if s.o.Names > 0 {
		n %= s.o.Names
	}
	key := fmt.Sprintf("/registry/events/ns-%d/ev-%06d", n%s.o.Namespaces, n)
	s.send("create/events", create(key, put(key, s.value(s.nextClient, 600), s.eventLse)), nil)
}

// list is a paged, consistent list: the first page at the current revision, the next ones (when all is
// true) pinned to it.
func (s *sim) list(prefix string, limit int64, opname string, rev int64, all bool) {
	s.page(prefix, prefix, limit, opname, rev, all)
}

// page sends one page of a list and, when all, asks for the next one once it returns.
func (s *sim) page(prefix, from string, limit int64, opname string, rev int64, all bool) {
	r := history.Request{Kind: history.KindRange, Range: &history.Range{Key: from, End: prefixEnd(prefix), Limit: limit, Revision: rev}}
	s.send(opname, r, func(resp *history.Response, err error) {
		if !all || err != nil || resp == nil || !resp.Range.More || len(resp.Range.KVs) == 0 {
			return
		}
		at := rev
		if at == 0 {
			at = resp.Revision
		}
		next := resp.Range.KVs[len(resp.Range.KVs)-1].Key + "\x00"
		s.page(prefix, next, limit, opname, at, all)
	})
}

// cacheList is the consistent list from the watch cache: learn the current revision with a one-key
// range, then request progress on the pods watchers until they reach it.
func (s *sim) cacheList() {
	r := history.Request{Kind: history.KindRange, Range: &history.Range{Key: "/registry/pods/", End: prefixEnd("/registry/pods/"), Limit: 1}}
	a := s.rng.IntN(s.o.Apiservers)
	s.send("list/pods/cache", r, func(*history.Response, error) {
		for _, w := range s.watchers {
			if w.apiserver == a {
				s.progress(w, 0)
			}
		}
	})
}

// serializableGet reads a pod serializably from a member a few revisions behind: the store answers at
// once, at the lagging revision, rather than through send.
func (s *sim) serializableGet() {
	key := s.randomPod()
	if key == "" {
		return
	}
	// A lagging member answers from a few revisions back.
	call := s.now
	c := s.client()
	lag := s.rng.Int64N(5)
	rev := max(s.st.rev-lag, s.st.compactRev, 1)
	r := history.Request{Kind: history.KindRange, Range: &history.Range{Key: key, Serializable: true}}
	rr, err := s.st.rangeAt(r.Range, rev)
	if s.bug("future-serializable", 0.05) {
		rev = s.st.rev + 50
	}
	ret := call + s.latency(call)
	s.at(ret, func() {
		op := history.Operation{Client: c, Op: "get/pods/serializable", Call: call, Return: ret, Request: r}
		if err != nil {
			op.Error = "other: " + err.Error()
		} else {
			op.Response = &history.Response{Revision: rev, Range: rr}
		}
		s.w.Operation(&op)
		s.stats.Operations++
		s.free = append(s.free, c)
	})
}

// keysOnly lists a namespace's pod keys without their values.
func (s *sim) keysOnly() {
	r := history.Request{Kind: history.KindRange, Range: &history.Range{Key: "/registry/pods/ns-1/", End: prefixEnd("/registry/pods/ns-1/"), KeysOnly: true, Limit: 50}}
	s.send("list/pods/keys", r, nil)
}

// configMap puts a config map or, one time in eight, deletes one, asking for previous values.
func (s *sim) configMap() {
	key := fmt.Sprintf("/registry/configmaps/default/cm-%02d", s.rng.IntN(40))
	if s.rng.IntN(8) == 0 {
		s.send("delete/configmaps", history.Request{Kind: history.KindDelete, Delete: &history.Delete{Key: key, PrevKV: true}}, nil)
		return
	}
	r := put(key, s.value(s.nextClient, 1024), 0)
	r.Put.PrevKV = s.rng.IntN(2) == 0
	s.send("put/configmaps", r, nil)
}
