package kube

import (
	"context"
	"math/rand/v2"
	"strconv"
	"sync"

	"github.com/etcd-chaosbench/chaosbench/results/history"
	"github.com/etcd-chaosbench/chaosbench/workloads"
)

// Objects a cluster of any size has besides its pods and nodes.
const (
	configMapsPerNamespace = 2 // kube-root-ca.crt and an application's
	secretsPerNamespace    = 2
	largeConfigMaps        = 5
)

// Leader-elected components: each has a lease in kube-system, renewed by its leader.
var electedComponents = []string{"kube-controller-manager", "kube-scheduler"}

// pod is a pod the churn can delete.
type pod struct{ namespace, name string }

func (p pod) key() string { return key(ResPods, p.namespace, p.name) }

// podQueue holds the live pods oldest first; churn deletes from the front and adds at the back, so that
// the pod count stays steady. Its memory is bounded by the pod count.
type podQueue struct {
	mu   sync.Mutex
	pods []pod
	head int
}

func (q *podQueue) push(p pod) {
	q.mu.Lock()
	q.pods = append(q.pods, p)
	q.mu.Unlock()
}

func (q *podQueue) pop() (pod, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.pods) {
		return pod{}, false
	}
	p := q.pods[q.head]
	q.head++
	if q.head > len(q.pods)/2 && q.head > 1024 {
		q.pods = append(q.pods[:0:0], q.pods[q.head:]...)
		q.head = 0
	}
	return p, true
}

func (q *podQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.pods) - q.head
}

// preloadBatch bounds the objects and bytes of one preload transaction.
const (
	preloadBatch      = 128
	preloadBatchBytes = 1 << 20
)

// preloader writes objects in transactions of creates.
type preloader struct {
	c     *workloads.Client
	puts  []history.Request
	cmps  []history.Compare
	bytes int
}

func (p *preloader) add(ctx context.Context, k string, size int) error {
	return p.addLeased(ctx, k, size, 0)
}

// addLeased adds an object attached to a lease (none: 0).
func (p *preloader) addLeased(ctx context.Context, k string, size int, lease int64) error {
	if len(p.puts) == preloadBatch || (p.bytes+size > preloadBatchBytes && len(p.puts) > 0) {
		if err := p.flush(ctx); err != nil {
			return err
		}
	}
	p.puts = append(p.puts, history.Request{Kind: history.KindPut, Put: &history.Put{Key: k, Value: p.c.NewValue(size), Lease: lease}})
	p.cmps = append(p.cmps, history.Compare{Key: k, Target: history.CompareModRevision, Result: history.Equal})
	p.bytes += size
	return nil
}

// flush sends the batch as one transaction: if none of its objects exists, create them all.
func (p *preloader) flush(ctx context.Context) error {
	if len(p.puts) == 0 {
		return nil
	}
	_, err := p.c.Do(ctx, nil, "preload", history.Request{Kind: history.KindTxn, Txn: &history.Txn{Compares: p.cmps, Then: p.puts}})
	p.puts, p.cmps, p.bytes = p.puts[:0:0], p.cmps[:0:0], 0
	return err
}

// preload creates the cluster's objects: namespaces, nodes and their leases, pods, configmaps (a few
// large), secrets, and the control plane's leases. It returns the pods, in the order churn deletes them.
//
// A generator with a share of a split load creates what belongs to its apiservers: node i and pod i belong
// to apiserver i mod apiservers, as kubelets and clients are spread over them, and the cluster-wide
// objects to apiserver 0.
func (w *Workload) preload(ctx context.Context) (*podQueue, error) {
	via := w.local[0]
	c := via.client()
	defer via.release(c)
	rng := w.r.Rand("preload", w.cfg.Share.Index)
	sz := func(res string) int { return w.cfg.Sizes[res].pick(rng) }
	p := &preloader{c: c}
	mine := func(i int) bool { return w.owns(i % w.cfg.Apiservers) }
	if err := w.preloadShared(ctx, p, sz); err != nil {
		return nil, err
	}
	for i := range w.cfg.Nodes {
		if !mine(i) {
			continue
		}
		if err := p.add(ctx, key(ResNodes, "", nodeName(i)), sz(ResNodes)); err != nil {
			return nil, err
		}
		if err := p.add(ctx, key(ResLeases, nsNodeLease, nodeName(i)), sz(ResLeases)); err != nil {
			return nil, err
		}
	}
	for i := range w.cfg.Apiservers {
		if !mine(i) {
			continue
		}
		if err := p.add(ctx, key(ResLeases, nsSystem, apiserverLease(i)), sz(ResLeases)); err != nil {
			return nil, err
		}
	}
	q := &podQueue{}
	for i := range w.cfg.Pods() {
		if !mine(i) {
			continue
		}
		pd := pod{namespace: namespaceName(i % w.cfg.Namespaces), name: "pod-" + strconv.Itoa(i)}
		if err := p.add(ctx, pd.key(), sz(ResPods)); err != nil {
			return nil, err
		}
		q.push(pd)
	}
	if err := w.preloadKept(ctx, p, rng); err != nil {
		return nil, err
	}
	if err := p.flush(ctx); err != nil {
		return nil, err
	}
	// Shuffle the deletion order, seeded: churn removes pods of every namespace and node.
	rng.Shuffle(len(q.pods), func(i, j int) { q.pods[i], q.pods[j] = q.pods[j], q.pods[i] })
	return q, nil
}

// preloadKept creates, when apiserver 0 is simulated here, the events that exist when the load begins
// (on leases of the event TTL, at most 1000 events a lease, as the apiserver attaches them) and the
// objects of the resources the workload does not model.
func (w *Workload) preloadKept(ctx context.Context, p *preloader, rng *rand.Rand) error {
	if !w.owns(0) {
		return nil
	}
	var lease int64
	for i := range w.cfg.Events {
		if i%leaseMaxObjects == 0 {
			resp, err := p.c.Do(ctx, nil, "preload", history.Request{Kind: history.KindLeaseGrant, Lease: &history.Lease{TTL: int64(w.cfg.EventTTL.Seconds())}})
			if err != nil {
				return err
			}
			lease = resp.Lease.ID
		}
		k := key(ResEvents, namespaceName(i%w.cfg.Namespaces), "kept-"+strconv.Itoa(i))
		if err := p.addLeased(ctx, k, w.cfg.Sizes[ResEvents].pick(rng), lease); err != nil {
			return err
		}
	}
	for _, x := range w.cfg.Others {
		for i := range x.Objects {
			if err := p.add(ctx, "/registry/"+x.Prefix+"/object-"+strconv.Itoa(i), x.Bytes); err != nil {
				return err
			}
		}
	}
	return nil
}

// preloadShared creates the cluster-wide objects (namespaces with their configmaps and secrets, large
// configmaps, the elected components' leases) when apiserver 0 is simulated here.
func (w *Workload) preloadShared(ctx context.Context, p *preloader, sz func(string) int) error {
	if !w.owns(0) {
		return nil
	}
	namespaces := systemNamespaces()
	for i := range w.cfg.Namespaces {
		namespaces = append(namespaces, namespaceName(i))
	}
	for _, ns := range namespaces {
		if err := p.add(ctx, key(ResNamespaces, "", ns), sz(ResNamespaces)); err != nil {
			return err
		}
		for i := range configMapsPerNamespace {
			if err := p.add(ctx, key(ResConfigMaps, ns, "config-"+strconv.Itoa(i)), sz(ResConfigMaps)); err != nil {
				return err
			}
		}
	}
	// Two secrets a namespace, or the options' number spread over the namespaces.
	secrets := w.cfg.Secrets
	if secrets == 0 {
		secrets = secretsPerNamespace * len(namespaces)
	}
	for i := range secrets {
		k := key(ResSecrets, namespaces[i%len(namespaces)], "secret-"+strconv.Itoa(i/len(namespaces)))
		if err := p.add(ctx, k, sz(ResSecrets)); err != nil {
			return err
		}
	}
	for i := range largeConfigMaps {
		if err := p.add(ctx, key(ResConfigMaps, nsSystem, "large-"+strconv.Itoa(i)), sz(resLargeConfigMaps)); err != nil {
			return err
		}
	}
	for _, comp := range electedComponents {
		if err := p.add(ctx, key(ResLeases, nsSystem, comp), sz(ResLeases)); err != nil {
			return err
		}
	}
	return nil
}

// MeanObjectBytes is the mean value size of a resource's objects as the workload writes them: for
// configmaps, every namespace's and the few large ones together, as a cluster's size estimate of its
// configmaps counts them (a profile's mean_bytes).
func (c Config) MeanObjectBytes(res string) float64 {
	if res != ResConfigMaps {
		return c.Sizes[res].Mean()
	}
	regular := float64(configMapsPerNamespace * (c.Namespaces + len(systemNamespaces())))
	return (regular*c.Sizes[ResConfigMaps].Mean() + largeConfigMaps*c.Sizes[resLargeConfigMaps].Mean()) / (regular + largeConfigMaps)
}

// systemNamespaces are the namespaces every cluster has besides its workloads'.
func systemNamespaces() []string { return []string{"default", nsSystem, "kube-public", nsNodeLease} }

func apiserverLease(i int) string { return "apiserver-" + strconv.Itoa(i) }

// masterLeaseKey is the apiserver's endpoint reconciler key: its advertised IP.
func masterLeaseKey(i int) string { return key(ResMasterLeases, "", "10.0.0."+strconv.Itoa(i+1)) }
