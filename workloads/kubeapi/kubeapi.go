// Package kubeapi drives real kube-apiservers through client-go, with the cluster size and churn of a
// kube workload configuration: it is the `controlplane` workload, the real counterpart of package kube's
// emulation. The apiservers, a controller-manager, a scheduler and KWOK (package clusters/controlplane)
// produce the etcd traffic; this package only does what a cluster's users and kubelets would: it creates
// namespaces, KWOK-managed nodes, configmaps, secrets and pods, then creates and deletes pods at the churn
// rate and lists pods the way kubectl does, while one watch per apiserver follows every pod.
//
// Requests are recorded through the run's recorder under the names of the apiserver's own request metrics,
// verb/resource (create/pods, delete/pods, list/pods, watch-event/pods), so that latency tables, the
// schedule-miss counts and availability read as for any other workload.
package kubeapi

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/workloads"
	"github.com/etcd-chaosbench/chaosbench/workloads/kube"
)

// Name is the workload's name (--workload).
const Name = "controlplane"

// KWOKNodeAnnotation marks the nodes KWOK simulates (see clusters/controlplane).
const KWOKNodeAnnotation = "kwok.x-k8s.io/node"

// Target is the control plane the workload talks to.
type Target struct {
	// URLs are the apiservers' base URLs.
	URLs []string
	// CA verifies the apiservers; Cert and Key authenticate the workload to them.
	CA, Cert, Key string
}

// Workload is the controlplane workload.
type Workload struct {
	cfg     kube.Config
	target  Target
	clients []kubernetes.Interface

	mu   sync.Mutex
	pods []podRef // the pods churn may delete, in deletion order

	churnSeq    atomic.Int64
	watchEvents atomic.Int64
	stats       Stats
}

// Stats counts what the workload did.
type Stats struct {
	Preloaded struct {
		Namespaces, Nodes, Pods, ConfigMaps, Secrets int
	}
	PreloadSeconds float64
	// ScheduledAtStart is how many preloaded pods the scheduler had bound when the load began.
	ScheduledAtStart int
	// WatchEvents counts the pod events the workload's watches received.
	WatchEvents int64
}

type podRef struct{ namespace, name string }

// New returns the workload for a resolved kube configuration (nodes, pods, namespaces, churn, list rate,
// apiservers); SetTarget must be called before Setup.
func New(cfg kube.Config) *Workload { return &Workload{cfg: cfg} }

// SetTarget says which apiservers to drive.
func (w *Workload) SetTarget(t Target) { w.target = t }

// Config returns the workload's configuration.
func (w *Workload) Config() kube.Config { return w.cfg }

// Stats returns what the workload did.
func (w *Workload) Stats() *Stats {
	s := w.stats
	s.WatchEvents = w.watchEvents.Load()
	return &s
}

// Name returns "controlplane".
func (w *Workload) Name() string { return Name }

// Setup connects to every apiserver and preloads the cluster's objects; none of it is measured.
func (w *Workload) Setup(ctx context.Context, r *workloads.Runner) error {
	if len(w.target.URLs) == 0 {
		return errors.New("controlplane workload: no apiservers to drive")
	}
	for _, u := range w.target.URLs {
		cs, err := kubernetes.NewForConfig(&rest.Config{
			Host:            u,
			TLSClientConfig: rest.TLSClientConfig{CAFile: w.target.CA, CertFile: w.target.Cert, KeyFile: w.target.Key},
			// The load is paced here; client-go's own rate limiter must not reshape it.
			QPS: 10000, Burst: 10000,
			Timeout: 60 * time.Second,
		})
		if err != nil {
			return fmt.Errorf("client for %s: %w", u, err)
		}
		w.clients = append(w.clients, cs)
	}
	began := time.Now()
	if err := w.preload(ctx, r.Rand("preload", 0)); err != nil {
		return fmt.Errorf("preload: %w", err)
	}
	w.stats.PreloadSeconds = time.Since(began).Seconds()
	return nil
}

// client returns the clientset of apiserver i (mod the number of apiservers).
func (w *Workload) client(i int) kubernetes.Interface { return w.clients[i%len(w.clients)] }

// parallel runs f(0..n-1) on 16 goroutines and returns the first error.
func parallel(ctx context.Context, n int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(16, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// retry retries a create while the cluster is still settling (a namespace's default service account not
// created yet, an apiserver busy), and ignores objects that already exist.
func retry(ctx context.Context, f func() error) error {
	var err error
	for range 60 {
		err = f()
		if err == nil || apierrors.IsAlreadyExists(err) {
			return nil
		}
		if !apierrors.IsForbidden(err) && !apierrors.IsServerTimeout(err) && !apierrors.IsTooManyRequests(err) && !apierrors.IsServiceUnavailable(err) && !apierrors.IsTimeout(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
	return err
}

func namespaceName(i int) string { return "ns-" + strconv.Itoa(i) }
func nodeName(i int) string      { return "node-" + strconv.Itoa(i) }

// filler returns n printable bytes from rng, for configmap and secret data.
func filler(rng *rand.Rand, n int) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, n)
	for i := range b {
		b[i] = alphabet[rng.IntN(len(alphabet))]
	}
	return string(b)
}

// preload creates what package kube preloads, through the apiservers: namespaces with a configmap and two
// secrets each (the controller-manager adds kube-root-ca.crt, the second configmap of the emulation), five
// large configmaps in kube-system, KWOK nodes, and Nodes x PodsPerNode pods for the scheduler to bind.
func (w *Workload) preload(ctx context.Context, rng *rand.Rand) error {
	cfg := w.cfg
	sizes := cfg.Sizes
	pick := func(res string) int { return sizes[res].Min + rng.IntN(max(1, sizes[res].Max-sizes[res].Min+1)) }
	type cm struct {
		ns, name string
		size     int
		secret   bool
	}
	var data []cm
	for i := range cfg.Namespaces {
		ns := namespaceName(i)
		data = append(data, cm{ns, "config-1", pick(kube.ResConfigMaps), false})
		for j := range 2 {
			data = append(data, cm{ns, "secret-" + strconv.Itoa(j), pick(kube.ResSecrets), true})
		}
	}
	for i := range 5 {
		data = append(data, cm{"kube-system", "large-" + strconv.Itoa(i), 100<<10 + rng.IntN(400<<10), false})
	}
	values := make([]string, len(data))
	for i, d := range data {
		values[i] = filler(rng, d.size)
	}
	c := w.client(0)
	if err := parallel(ctx, cfg.Namespaces, func(ctx context.Context, i int) error {
		return retry(ctx, func() error {
			_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespaceName(i)}}, metav1.CreateOptions{})
			return err
		})
	}); err != nil {
		return fmt.Errorf("namespaces: %w", err)
	}
	w.stats.Preloaded.Namespaces = cfg.Namespaces
	if err := parallel(ctx, len(data), func(ctx context.Context, i int) error {
		d := data[i]
		return retry(ctx, func() error {
			meta := metav1.ObjectMeta{Name: d.name, Namespace: d.ns}
			var err error
			if d.secret {
				_, err = w.client(i).CoreV1().Secrets(d.ns).Create(ctx, &corev1.Secret{ObjectMeta: meta, StringData: map[string]string{"data": values[i]}}, metav1.CreateOptions{})
			} else {
				_, err = w.client(i).CoreV1().ConfigMaps(d.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"data": values[i]}}, metav1.CreateOptions{})
			}
			return err
		})
	}); err != nil {
		return fmt.Errorf("configmaps and secrets: %w", err)
	}
	for _, d := range data {
		if d.secret {
			w.stats.Preloaded.Secrets++
		} else {
			w.stats.Preloaded.ConfigMaps++
		}
	}
	if err := parallel(ctx, cfg.Nodes, func(ctx context.Context, i int) error {
		return retry(ctx, func() error {
			_, err := w.client(i).CoreV1().Nodes().Create(ctx, kwokNode(nodeName(i)), metav1.CreateOptions{})
			return err
		})
	}); err != nil {
		return fmt.Errorf("nodes: %w", err)
	}
	w.stats.Preloaded.Nodes = cfg.Nodes
	pods := make([]podRef, cfg.Pods())
	for i := range pods {
		pods[i] = podRef{namespace: namespaceName(i % cfg.Namespaces), name: "pod-" + strconv.Itoa(i)}
	}
	if err := parallel(ctx, len(pods), func(ctx context.Context, i int) error {
		return retry(ctx, func() error {
			_, err := w.client(i).CoreV1().Pods(pods[i].namespace).Create(ctx, newPod(pods[i].name), metav1.CreateOptions{})
			return err
		})
	}); err != nil {
		return fmt.Errorf("pods: %w", err)
	}
	w.stats.Preloaded.Pods = len(pods)
	// Churn deletes the preloaded pods in a seeded random order, then the pods it created, oldest first.
	rng.Shuffle(len(pods), func(i, j int) { pods[i], pods[j] = pods[j], pods[i] })
	w.pods = pods
	// Let the scheduler bind the preloaded pods (and KWOK start them) before the measured load: a real
	// cluster's steady state, not its bootstrap.
	deadline := time.Now().Add(max(60*time.Second, time.Duration(len(pods))*20*time.Millisecond))
	for {
		n, err := w.scheduled(ctx)
		w.stats.ScheduledAtStart = n
		if err == nil && n >= len(pods) {
			break
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Second)
	}
	return ctx.Err()
}

// scheduled counts the pods bound to a node.
func (w *Workload) scheduled(ctx context.Context) (int, error) {
	n := 0
	opts := metav1.ListOptions{Limit: 5000, FieldSelector: "spec.nodeName!="}
	for {
		l, err := w.client(0).CoreV1().Pods("").List(ctx, opts)
		if err != nil {
			return n, err
		}
		n += len(l.Items)
		if l.Continue == "" {
			return n, nil
		}
		opts.Continue = l.Continue
	}
}

// kwokNode returns a node for KWOK to manage, with the capacity of a mid-sized machine.
func kwokNode(name string) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("32"),
		corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{KWOKNodeAnnotation: "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels:      map[string]string{"type": "kwok", "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
}

// newPod returns a pod like a small Deployment's, for the scheduler to place on a KWOK node.
func newPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "chaosbench", "chaosbench/pod": name}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:  "app",
				Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("16Mi"),
				}},
			}},
			NodeSelector: map[string]string{"type": "kwok"},
		},
	}
}

// Run drives the load until the run's duration ends: pod churn at the configured rate, kubectl-style
// paged lists, and one watch of every pod per apiserver.
func (w *Workload) Run(ctx context.Context, r *workloads.Runner) error {
	rec := r.Recorder()
	rec.Begin()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var watchers sync.WaitGroup
	for i := range w.clients {
		watchers.Go(func() { w.watchPods(ctx, r, i) })
	}
	var wg sync.WaitGroup
	if w.cfg.Churn > 0 {
		wg.Go(func() {
			r.Stream(ctx, w.cfg.Churn, 0, 8, func(ctx context.Context, i int, s *workloads.Slot) {
				w.churn(ctx, rec, s)
			})
		})
	}
	if w.cfg.ListRate > 0 {
		wg.Go(func() {
			rng := r.Rand("lists", 0)
			var mu sync.Mutex
			r.Stream(ctx, w.cfg.ListRate, 0, 4, func(ctx context.Context, i int, s *workloads.Slot) {
				mu.Lock()
				ns := namespaceName(rng.IntN(w.cfg.Namespaces))
				mu.Unlock()
				w.list(ctx, rec, s, ns)
			})
		})
	}
	wg.Wait()
	cancel()
	watchers.Wait()
	return nil
}

// record hands one request to the recorder.
func record(rec *workloads.Recorder, worker int, op string, s *workloads.Slot, start time.Duration, err error, access results.Access) {
	r := results.Record{Op: op, Intended: start, Start: start, End: rec.Now(), Access: access}
	if s != nil {
		r.Intended, r.Miss = s.Intended, s.Miss
	}
	switch {
	case err == nil:
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		r.Outcome, r.ErrClass = results.Failed, "conflict"
	default:
		r.Outcome, r.ErrClass = results.Error, errClass(err)
	}
	rec.Record(worker, &r)
}

// errClass names an apiserver error by its reason (timeout, too-many-requests, ...).
func errClass(err error) string {
	if errors.Is(err, context.DeadlineExceeded) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) {
		return "timeout"
	}
	if r := apierrors.ReasonForError(err); r != metav1.StatusReasonUnknown {
		return strings.ToLower(string(r))
	}
	return "error"
}

// churn creates one pod and deletes the oldest one left, as a Deployment's rollout would.
func (w *Workload) churn(ctx context.Context, rec *workloads.Recorder, s *workloads.Slot) {
	k := int(w.churnSeq.Add(1) - 1)
	p := podRef{namespace: namespaceName(k % w.cfg.Namespaces), name: "churn-" + strconv.Itoa(k)}
	c := w.client(k)
	start := rec.Now()
	_, err := c.CoreV1().Pods(p.namespace).Create(ctx, newPod(p.name), metav1.CreateOptions{})
	if ctx.Err() != nil {
		return
	}
	record(rec, k, "create/pods", s, start, err, results.AccessWrite)
	w.mu.Lock()
	if err == nil {
		w.pods = append(w.pods, p)
	}
	var old podRef
	ok := len(w.pods) > w.cfg.Pods()
	if ok {
		old, w.pods = w.pods[0], w.pods[1:]
	}
	w.mu.Unlock()
	if !ok {
		return
	}
	start = rec.Now()
	err = c.CoreV1().Pods(old.namespace).Delete(ctx, old.name, metav1.DeleteOptions{})
	if ctx.Err() != nil {
		return
	}
	record(rec, k, "delete/pods", nil, start, err, results.AccessWrite)
}

// list lists a namespace's pods as kubectl does: pages of 500.
func (w *Workload) list(ctx context.Context, rec *workloads.Recorder, s *workloads.Slot, ns string) {
	k := int(s.N)
	start := rec.Now()
	opts := metav1.ListOptions{Limit: 500}
	var err error
	for {
		var l *corev1.PodList
		l, err = w.client(k).CoreV1().Pods(ns).List(ctx, opts)
		if err != nil || l.Continue == "" {
			break
		}
		opts.Continue = l.Continue
	}
	if ctx.Err() != nil {
		return
	}
	record(rec, k, "list/pods", s, start, err, results.AccessRead)
}

// watchPods follows every pod through apiserver i until ctx ends, recording each event's arrival (as a
// zero-length operation: the apiserver does not say when the change was written).
func (w *Workload) watchPods(ctx context.Context, r *workloads.Runner, i int) {
	rec := r.Recorder()
	worker := 1000 + i
	for ctx.Err() == nil {
		wi, err := w.client(i).CoreV1().Pods("").Watch(ctx, metav1.ListOptions{AllowWatchBookmarks: true})
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		for ev := range wi.ResultChan() {
			if ev.Type == watch.Bookmark || ev.Type == watch.Error {
				continue
			}
			now := rec.Now()
			w.watchEvents.Add(1)
			rec.Record(worker, &results.Record{Op: "watch-event/pods", Intended: now, Start: now, End: now})
		}
		wi.Stop()
	}
}
