package kube

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/history"
	"github.com/etcd-chaosbench/chaosbench/workloads"
)

// watchCachePage is the page size of the watch cache's initial list.
const watchCachePage = 10000

// objectCache holds what one apiserver's watch cache knows of one resource: each object's mod revision
// (enough to update it without reading it first) and the revision the cache has seen up to. Its memory is
// bounded by the resource's object count.
type objectCache struct {
	mu      sync.RWMutex
	objects map[string]int64 // key -> mod revision
	rev     int64
	changed chan struct{} // closed and replaced whenever rev moves
}

func newObjectCache() *objectCache {
	return &objectCache{objects: map[string]int64{}, changed: make(chan struct{})}
}

// get returns the cached mod revision of an object.
func (c *objectCache) get(k string) (int64, bool) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	rev, ok := c.objects[k]
	return rev, ok
}

// len returns the number of cached objects.
func (c *objectCache) len() int {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.objects)
}

// revision returns the revision the cache is current at.
func (c *objectCache) revision() int64 {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return c.rev
}

// put records an object's new mod revision unless the cache already holds a newer one.
func (c *objectCache) put(k string, modRev int64) {
	c.mu.Lock()
	if cur, ok := c.objects[k]; !ok || cur < modRev {
		c.objects[k] = modRev
	}
	c.mu.Unlock()
}

// forget drops an object the apiserver deleted, when no watch keeps the cache current.
func (c *objectCache) forget(k string) {
	c.mu.Lock()
	delete(c.objects, k)
	c.mu.Unlock()
}

// apply applies a watch response: events in order, then the response's revision.
func (c *objectCache) apply(resp *history.WatchResponse) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, ev := range resp.Events {
		if ev.Type == history.EventDelete {
			delete(c.objects, ev.KV.Key)
		} else {
			c.objects[ev.KV.Key] = ev.KV.ModRevision
		}
	}
	c.advance(resp.Revision)
}

// replace swaps in the result of a list at rev.
func (c *objectCache) replace(objects map[string]int64, rev int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.objects = objects
	c.advance(rev)
}

func (c *objectCache) advance(rev int64) {
	if rev > c.rev {
		c.rev = rev
		close(c.changed)
		c.changed = make(chan struct{})
	}
}

// waitFor waits until the cache is current at rev or later, or ctx ends.
func (c *objectCache) waitFor(ctx context.Context, rev int64) error {
	for {
		c.mu.RLock()
		cur, ch := c.rev, c.changed
		c.mu.RUnlock()
		if cur >= rev {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// watchCache is one apiserver's cacher of one resource: a paged list, then a prefix watch from the list's
// revision + 1 with previous values, progress notifications and require-leader; a watch that ends is
// resumed from the last revision seen, and one that ends because that revision was compacted relists from
// scratch, as kube-apiserver's reflector does.
type watchCache struct {
	res     string
	prefix  string
	client  *workloads.Client
	cache   *objectCache
	onEvent func(*watchCache, *history.WatchResponse, history.Event)
	// started, when set, is called once etcd has confirmed the cache's first watch.
	started func()
	// stream is the current watch's stream: progress requests go on it.
	stream  atomic.Pointer[workloads.WatchStream]
	relists atomic.Int64
	lists   atomic.Int64
}

// list replaces the cache's content with a consistent paged list; it is recorded as list/<resource>.
func (w *watchCache) list(ctx context.Context) error {
	objects := map[string]int64{}
	rev, _, err := list(ctx, w.client, nil, "list/"+w.res, w.prefix, prefixEnd(w.prefix), watchCachePage, func(kv history.KV) {
		objects[kv.Key] = kv.ModRevision
	})
	if err != nil {
		return err
	}
	w.lists.Add(1)
	w.cache.replace(objects, rev)
	return nil
}

// run keeps the cache current until ctx ends: it watches from the cache's revision, resuming after errors
// (with a short backoff, as the reflector's) and relisting after a compaction.
func (w *watchCache) run(ctx context.Context) {
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		relist, err := w.watch(ctx)
		if ctx.Err() != nil {
			return
		}
		if relist {
			w.relists.Add(1)
			err = w.list(ctx)
		}
		if err == nil {
			backoff = 100 * time.Millisecond
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

var errWatchEnded = errors.New("watch ended")

// watch runs one watch from the cache's revision + 1 until it ends. It reports whether the watch ended
// because that revision was compacted.
func (w *watchCache) watch(ctx context.Context) (relist bool, err error) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// Every watch of a kube-apiserver has a gRPC stream of its own (the fidelity comparison counts as
	// many streams as watchers on etcd).
	stream := w.client.NewWatchStream()
	defer stream.Close()
	w.stream.Store(stream)
	watch := stream.Watch(wctx, history.WatchRequest{
		Key: w.prefix, End: prefixEnd(w.prefix), Revision: w.cache.revision() + 1,
		PrevKV: true, ProgressNotify: true, RequireLeader: true,
	})
	if w.started != nil {
		go func() {
			select {
			case <-watch.Ready:
				w.started()
			case <-wctx.Done():
			}
		}()
	}
	for resp := range watch.C {
		if resp.CompactRevision > 0 {
			return true, nil
		}
		if resp.Canceled || resp.Error != "" {
			return false, errWatchEnded
		}
		w.cache.apply(&resp)
		if w.onEvent != nil {
			for _, ev := range resp.Events {
				w.onEvent(w, &resp, ev)
			}
		}
	}
	return false, errWatchEnded
}

// deliveries measures watch delivery latency: from a write's acknowledgement to its event's arrival at each
// apiserver's watch cache, recorded as watch-event/<resource>.
type deliveries struct {
	rec      *workloads.Recorder
	delivery *workloads.Delivery
}

// acked records the acknowledgement of a write of a cached resource.
func (d *deliveries) acked(c *workloads.Client, res string, k string, id uint64, rev int64) {
	if d == nil {
		return
	}
	at := d.rec.Now()
	for range d.delivery.Acked(id, at) {
		d.rec.Record(c.ID(), &results.Record{Op: "watch-event/" + res, Key: k, Intended: at, Start: at, End: at, Revision: rev, WriteID: id})
	}
}

// failed forgets a write that did not happen.
func (d *deliveries) failed(id uint64) {
	if d != nil {
		d.delivery.Forget(id)
	}
}

// event records the arrival of an event at a watch cache.
func (d *deliveries) event(w *watchCache, resp *history.WatchResponse, ev history.Event) {
	if ev.Type != history.EventPut || ev.KV.Value.ID == 0 {
		return
	}
	at := time.Duration(resp.Time)
	if ack, ok := d.delivery.Received(ev.KV.Value.ID, at); ok {
		d.rec.Record(w.client.ID(), &results.Record{Op: "watch-event/" + w.res, Key: ev.KV.Key, Intended: ack, Start: ack, End: max(at, ack), Revision: ev.KV.ModRevision, WriteID: ev.KV.Value.ID})
	}
}

// idleResources are the built-in resources of Kubernetes 1.37 whose watch caches the emulation does not
// model: a kube-apiserver watches each of them all the same, one watch and one gRPC stream each, and most
// see no writes. Their watches cost etcd watchers and streams, not events.
var idleResources = []string{
	"apiregistration.k8s.io/apiservices", "certificatesigningrequests", "clusterrolebindings", "clusterroles",
	"clustertrustbundles", "controllerrevisions", "cronjobs", "csidrivers", "csinodes", "csistoragecapacities",
	"apiextensions.k8s.io/customresourcedefinitions", "daemonsets", "deployments", "deviceclasses",
	"devicetaintrules", "services/endpoints", "endpointslices", "flowschemas", "horizontalpodautoscalers",
	"ingressclasses", "ingress", "ipaddresses", "jobs", "limitranges", "mutatingadmissionpolicies",
	"mutatingadmissionpolicybindings", "mutatingwebhookconfigurations", "networkpolicies",
	"persistentvolumeclaims", "persistentvolumes", "podcertificaterequests", "poddisruptionbudgets",
	"podtemplates", "priorityclasses", "prioritylevelconfigurations", "replicasets", "controllers",
	"resourceclaims", "resourceclaimtemplates", "resourcequotas", "resourceslices", "rolebindings", "roles",
	"runtimeclasses", "serviceaccounts", "servicecidrs", "services/specs", "statefulsets", "storageclasses",
	"validatingadmissionpolicies", "validatingadmissionpolicybindings", "validatingwebhookconfigurations",
	"volumeattachments", "volumeattributesclasses", "leasecandidates",
}

// apiResource names a resource the way kube-apiserver's etcd request metrics label it (their resource
// label): the plural of its API, where the storage prefix is a group's path or an older name
// (k8s.io/kubernetes pkg/registry/*/storage).
func apiResource(storagePrefix string) string {
	switch storagePrefix {
	case "services/endpoints":
		return "endpoints"
	case "services/specs":
		return "services"
	case "controllers":
		return "replicationcontrollers"
	case "ingress":
		return "ingresses"
	case ResNodes:
		return "nodes"
	}
	if i := strings.LastIndexByte(storagePrefix, '/'); i >= 0 {
		return storagePrefix[i+1:] // apiregistration.k8s.io/apiservices
	}
	return storagePrefix
}

// watchedIndex returns the index of an API resource (pods, nodes, limitranges, apiservices, ...) among
// the resources every apiserver watches: cachedResources, then idleResources.
func watchedIndex(api string) (int, bool) {
	for i, res := range cachedResources {
		if apiResource(res) == api {
			return i, true
		}
	}
	for j, res := range idleResources {
		if apiResource(res) == api {
			return len(cachedResources) + j, true
		}
	}
	return 0, false
}

// watchedAPI is the API resource of watched resource i (cachedResources, then idleResources).
func watchedAPI(i int) string {
	if i < len(cachedResources) {
		return apiResource(cachedResources[i])
	}
	return apiResource(idleResources[i-len(cachedResources)])
}

// Watched reports whether the workload's apiservers watch an API resource (a watch cache of it, or an
// idle watch), so that reads of it can be served from the cache (Options.CacheReads).
func Watched(api string) bool {
	_, ok := watchedIndex(api)
	return ok
}

// idleWatch holds one apiserver's watch of a resource it does not model until ctx ends, on a stream of
// its own, as the watch caches' watches. When etcd ends the watch (a member that lost its leader ends
// the watches that require one; a killed member ends them all), it watches again on a new stream from the
// last revision it saw, after the reflector's backoff, as a real apiserver does: progress requests then go
// to the live stream, never to a closed one. started is called each time etcd confirms the watch, with
// its stream (for progress requests).
func idleWatch(ctx context.Context, c *workloads.Client, res string, started func(*workloads.WatchStream)) {
	var rev int64
	backoff := 100 * time.Millisecond
	for ctx.Err() == nil {
		if watchIdle(ctx, c, res, &rev, started) {
			backoff = 100 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 2*time.Second)
	}
}

// watchIdle runs one idle watch from *rev + 1 (from now when *rev is 0) until it ends, keeping *rev at the
// newest revision etcd reported; a compaction of that revision starts the next watch from now (the
// resource holds nothing to relist). It reports whether etcd confirmed the watch.
func watchIdle(ctx context.Context, c *workloads.Client, res string, rev *int64, started func(*workloads.WatchStream)) (confirmed bool) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream := c.NewWatchStream()
	defer stream.Close()
	p := prefix(res)
	req := history.WatchRequest{Key: p, End: prefixEnd(p), PrevKV: true, ProgressNotify: true, RequireLeader: true}
	if *rev > 0 {
		req.Revision = *rev + 1
	}
	watch := stream.Watch(wctx, req)
	go func() {
		select {
		case <-watch.Ready:
			started(stream)
		case <-wctx.Done():
		}
	}()
	for resp := range watch.C {
		if resp.CompactRevision > 0 {
			*rev = 0
			return confirmed
		}
		if resp.Canceled || resp.Error != "" {
			return confirmed
		}
		confirmed = true
		*rev = max(*rev, resp.Revision)
	}
	return confirmed
}
