package profile

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// The apiserver's metrics a profile reads (the names of Kubernetes 1.30 and later, with the older names
// they replaced where a release renamed one).
const (
	mResourceObjects  = "apiserver_resource_objects"
	mSizeEstimate     = "apiserver_resource_size_estimate_bytes"
	mBookmarks        = "etcd_bookmark_total"
	mObjects          = "apiserver_storage_objects"
	mObjectsOld       = "etcd_object_counts"
	mEtcdRequests     = "etcd_requests_total"
	mEtcdDuration     = "etcd_request_duration_seconds_count"
	mListTotal        = "apiserver_storage_list_total"
	mListFetched      = "apiserver_storage_list_fetched_objects_total"
	mListEvaluated    = "apiserver_storage_list_evaluated_objects_total"
	mListReturned     = "apiserver_storage_list_returned_objects_total"
	mCacheLists       = "apiserver_cache_list_total"
	mCacheInits       = "apiserver_watch_cache_initializations_total"
	mWatchEvents      = "apiserver_watch_events_total"
	mWatchSizesCount  = "apiserver_watch_events_sizes_count"
	mWatchSizesSum    = "apiserver_watch_events_sizes_sum"
	mRequestDuration  = "apiserver_request_duration_seconds"
	mBodySizesCount   = "apiserver_request_body_size_bytes_count"
	mBodySizesSum     = "apiserver_request_body_size_bytes_sum"
	mLongRunning      = "apiserver_longrunning_requests"
	mRegisteredWatch  = "apiserver_registered_watchers"
	mEtcdDBSize       = "etcd_mvcc_db_total_size_in_bytes"
	mEtcdDBInUse      = "etcd_mvcc_db_total_size_in_use_in_bytes"
	mEtcdKeys         = "etcd_debugging_mvcc_keys_total"
	mEtcdHandled      = "grpc_server_handled_total"
	mEtcdStreams      = "etcd_debugging_mvcc_watch_stream_total"
	mEtcdWatchers     = "etcd_debugging_mvcc_watcher_total"
	mEtcdLeaseGranted = "etcd_debugging_lease_granted_total"
	mEtcdLeaseRevoked = "etcd_debugging_lease_revoked_total"
)

// apiserverCounters and etcdCounters are the counters whose going backwards marks a restart.
var (
	apiserverCounters = []string{mEtcdRequests, mListTotal, mWatchEvents}
	etcdCounters      = []string{mEtcdHandled, mEtcdLeaseGranted}
)

// Options tunes Build.
type Options struct {
	// Name is the profile's name.
	Name string
	// Interval, when set, is the time between consecutive scrapes, overriding the scrapes' own times.
	Interval time.Duration
}

// Build reads a profile from the scrapes of every kube-apiserver and every etcd member: two or more each,
// in time order. Input it cannot use (one scrape, scrapes not apart in time, a scrape of the wrong
// process) is a usage error.
func Build(apiservers, members []Series, opts Options) (*Profile, error) {
	if len(apiservers) == 0 {
		return nil, outcome.Usagef("profile: no kube-apiserver scrapes (--apiserver FIRST,SECOND[,...] per apiserver)")
	}
	for _, group := range [][]Series{apiservers, members} {
		for i := range group {
			if err := group[i].check(opts.Interval); err != nil {
				return nil, err
			}
		}
	}
	for _, s := range apiservers {
		for _, sc := range s.Scrapes {
			if !sc.has(mResourceObjects, mObjects, mObjectsOld, mEtcdRequests, mEtcdDuration, "apiserver_request_total") {
				return nil, outcome.Usagef("profile: %s: not a kube-apiserver's metrics (no apiserver_storage_objects, etcd_requests_total or apiserver_request_total)", sc.Source)
			}
		}
	}
	for _, s := range members {
		for _, sc := range s.Scrapes {
			if !sc.has("etcd_server_has_leader", mEtcdDBSize) {
				return nil, outcome.Usagef("profile: %s: not an etcd member's metrics (no etcd_server_has_leader)", sc.Source)
			}
		}
	}
	first := apiservers[0]
	p := &Profile{Format: Format, Version: Version, Shareable: Shareable, Name: opts.Name, Resources: map[string]*Resource{},
		Source: Source{Apiservers: len(apiservers), EtcdMembers: len(members), Scrapes: len(first.Scrapes),
			WindowSeconds: round(first.seconds(), 1),
			From:          first.Scrapes[0].At.UTC().Format(time.RFC3339), To: first.last().At.UTC().Format(time.RFC3339)}}
	if opts.Interval == 0 && !first.Scrapes[0].AtKnown {
		p.Source.Notes = append(p.Source.Notes, "the scrapes are timed by their files' modification times (no chaosbench header, no --interval)")
	}
	for _, s := range apiservers {
		p.Source.Notes = append(p.Source.Notes, s.resets(apiserverCounters)...)
	}
	for _, s := range members {
		p.Source.Notes = append(p.Source.Notes, s.resets(etcdCounters)...)
	}
	p.readApiservers(apiservers)
	if len(members) > 0 {
		p.readEtcd(members)
	} else {
		p.Source.Notes = append(p.Source.Notes, "no etcd member scrapes: the profile has no etcd figures")
	}
	p.assume()
	return p, nil
}

// check checks one process's scrapes, timing them by interval when it is set.
func (s *Series) check(interval time.Duration) error {
	if len(s.Scrapes) < 2 {
		src := ""
		if len(s.Scrapes) == 1 {
			src = " (" + s.Scrapes[0].Source + ")"
		}
		return outcome.Usagef("profile: %s: one scrape only%s: a profile needs two or more of each process, some minutes apart, for rates", s.Process, src)
	}
	if interval > 0 {
		t0 := s.Scrapes[0].At
		for i := range s.Scrapes {
			s.Scrapes[i].At = t0.Add(time.Duration(i) * interval)
		}
	}
	for i := 1; i < len(s.Scrapes); i++ {
		if !s.Scrapes[i].At.After(s.Scrapes[i-1].At) {
			return outcome.Usagef("profile: %s: %s is not later than %s (give the scrapes in time order, or --interval when their files' times are not the scrapes')",
				s.Process, s.Scrapes[i].Source, s.Scrapes[i-1].Source)
		}
	}
	return nil
}

// listTotals are the storage lists' counters added up over apiservers, per resource.
type listTotals struct {
	lists, fetched, evaluated, returned map[string]float64
	// sizes and lifetime are the watch events' count and bytes over the window and since the start;
	// stored the objects' count and estimated bytes (apiserver_resource_size_estimate_bytes).
	sizes, lifetime, stored map[string][2]float64
	// bodies are the create requests' count and body bytes over the window (apiserver_request_body_size_bytes).
	bodies map[string][2]float64
	// creators are the apiservers that created objects of a resource in the window.
	creators map[string]int
}

// res returns the profile's resource r, adding it.
func (p *Profile) res(r string) *Resource {
	x := p.Resources[r]
	if x == nil {
		x = &Resource{}
		p.Resources[r] = x
	}
	return x
}

// readApiservers fills the resources from the apiservers' scrapes: counts at the last scrape (the largest
// any apiserver reports: they share the storage), rates added up over apiservers.
func (p *Profile) readApiservers(apiservers []Series) {
	t := &listTotals{lists: map[string]float64{}, fetched: map[string]float64{}, evaluated: map[string]float64{},
		returned: map[string]float64{}, sizes: map[string][2]float64{}, lifetime: map[string][2]float64{}, stored: map[string][2]float64{},
		creators: map[string]int{}, bodies: map[string][2]float64{}}
	for _, s := range apiservers {
		p.readApiserver(s, t)
		p.readProbes(s)
	}
	if p.HealthChecks != nil {
		*p.HealthChecks = round(*p.HealthChecks, 4)
	}
	for r, n := range t.creators {
		if n < len(apiservers) {
			p.res(r).CreatedThrough = n
		}
	}
	for r, n := range t.lists {
		if r == "" || n <= 0 {
			continue
		}
		p.res(r).Lists = &Lists{PerSecond: round(n/apiservers[0].seconds(), 4), FetchedPerList: round(t.fetched[r]/n, 1),
			EvaluatedPerList: round(t.evaluated[r]/n, 1), ReturnedPerList: round(t.returned[r]/n, 1)}
	}
	for r, st := range t.stored {
		if r != "" && st[0] > 0 && st[1] > 0 {
			p.res(r).MeanBytes = round(st[1]/st[0], 0) // the objects as stored, the best measure of etcd's values
		}
	}
	for r, b := range t.bodies {
		if r == "" || b[0] <= 0 || (p.Resources[r] != nil && p.Resources[r].MeanBytes > 0) || t.sizes[r][0] > 0 {
			continue
		}
		// Nothing measured the stored objects (events: no watch cache, rarely watched): their create
		// requests' bodies, plus what the apiserver adds to the object it stores, stand in.
		p.Assumptions = append(p.Assumptions, Assumption{Figure: "resources." + r + ".mean_bytes", Assumed: round(b[1]/b[0]+storedOverhead, 0),
			Why: fmt.Sprintf("no size estimate or watch event of %s: its create requests' mean body (apiserver_request_body_size_bytes) and %d bytes the apiserver adds to each object it stores (uid, creation time, a managed-fields entry)", r, storedOverhead)})
	}
	for r, sz := range t.sizes {
		switch {
		case r == "" || (p.Resources[r] != nil && p.Resources[r].MeanBytes > 0):
		case sz[0] > 0:
			p.res(r).MeanBytes = round(sz[1]/sz[0], 0)
		case t.lifetime[r][0] > 0:
			// No event in the window: the apiservers' lifetime mean stands in, and says so.
			p.Assumptions = append(p.Assumptions, Assumption{Figure: "resources." + r + ".mean_bytes", Assumed: round(t.lifetime[r][1]/t.lifetime[r][0], 0),
				Why: "no watch event of " + r + " in the window: the mean size of every event since the apiservers started"})
		}
	}
	for _, r := range p.Resources {
		for op, v := range r.EtcdRequests {
			r.EtcdRequests[op] = round(v, 4)
		}
		r.CacheLists, r.WatchEvents, r.Bookmarks = round(r.CacheLists, 4), round(r.WatchEvents, 4), round(r.Bookmarks, 4)
	}
}

// readApiserver adds one apiserver's figures.
func (p *Profile) readApiserver(s Series, t *listTotals) {
	perSecond := func(v float64) float64 { return v / s.seconds() }
	last := s.last()
	// Kubernetes 1.34 deprecated apiserver_storage_objects for apiserver_resource_objects; older
	// releases had etcd_object_counts. A count of -1 is a failed count.
	objects := last.sum(mResourceObjects, resourceKey)
	for _, older := range []string{mObjects, mObjectsOld} {
		for r, n := range last.sum(older, resourceKey) {
			if _, ok := objects[r]; !ok {
				objects[r] = n
			}
		}
	}
	for r, n := range objects {
		if r != "" && n >= 0 {
			p.res(r).Objects = math.Max(p.res(r).Objects, n)
		}
	}
	for r, b := range last.sum(mSizeEstimate, resourceKey) {
		if n := objects[r]; r != "" && b > 0 && n > 0 {
			t.stored[r] = [2]float64{t.stored[r][0] + n, t.stored[r][1] + b}
		}
	}
	reqs := s.increase(mEtcdRequests, opResourceKey)
	if len(reqs) == 0 {
		reqs = s.increase(mEtcdDuration, opResourceKey)
	}
	for k, v := range reqs {
		op, r, _ := strings.Cut(k, "\x00")
		if r == "" || v <= 0 {
			continue
		}
		if op == "create" {
			t.creators[r]++
		}
		if p.res(r).EtcdRequests == nil {
			p.res(r).EtcdRequests = map[string]float64{}
		}
		p.res(r).EtcdRequests[op] += perSecond(v)
	}
	for name, into := range map[string]map[string]float64{mListTotal: t.lists, mListFetched: t.fetched, mListEvaluated: t.evaluated, mListReturned: t.returned} {
		for r, v := range s.increase(name, resourceKey) {
			into[r] += v
		}
	}
	add := func(name string, into func(*Resource) *float64, rate bool) {
		for r, v := range s.increase(name, resourceKey) {
			if r != "" && v > 0 {
				if rate {
					v = perSecond(v)
				}
				*into(p.res(r)) += v
			}
		}
	}
	add(mCacheLists, func(r *Resource) *float64 { return &r.CacheLists }, true)
	add(mCacheInits, func(r *Resource) *float64 { return &r.CacheInitializations }, false)
	add(mWatchEvents, func(r *Resource) *float64 { return &r.WatchEvents }, true)
	add(mBookmarks, func(r *Resource) *float64 { return &r.Bookmarks }, true)
	creates := func(l map[string]string) string {
		if l["verb"] != "create" {
			return ""
		}
		return resourceKey(l)
	}
	bodyCounts, bodySums := s.increase(mBodySizesCount, creates), s.increase(mBodySizesSum, creates)
	for r, n := range bodyCounts {
		t.bodies[r] = [2]float64{t.bodies[r][0] + n, t.bodies[r][1] + bodySums[r]}
	}
	counts, sums := s.increase(mWatchSizesCount, resourceKey), s.increase(mWatchSizesSum, resourceKey)
	lastCounts, lastSums := last.sum(mWatchSizesCount, resourceKey), last.sum(mWatchSizesSum, resourceKey)
	for r := range lastCounts {
		t.sizes[r] = [2]float64{t.sizes[r][0] + counts[r], t.sizes[r][1] + sums[r]}
		t.lifetime[r] = [2]float64{t.lifetime[r][0] + lastCounts[r], t.lifetime[r][1] + lastSums[r]}
	}
	watches := map[string]float64{}
	for _, smp := range last.Samples {
		if smp.Name == mLongRunning && smp.Labels["verb"] == "WATCH" {
			watches[resourceKey(smp.Labels)] += smp.Value
		}
	}
	if len(watches) == 0 {
		watches = last.sum(mRegisteredWatch, resourceKey)
	}
	for r, v := range watches {
		if r != "" && v > 0 {
			p.res(r).Watchers += v
		}
	}
}

// readProbes adds an apiserver's etcd health checks: its probes of /healthz, /livez and /readyz per second
// over the window, at most one a second.
func (p *Profile) readProbes(s Series) {
	if !s.last().has(mRequestDuration + "_count") {
		return
	}
	probes := s.increase(mRequestDuration+"_count", func(l map[string]string) string {
		switch l["subresource"] {
		case "/healthz", "/livez", "/readyz":
			if l["resource"] == "" {
				return "probe"
			}
		}
		return ""
	})["probe"]
	if p.HealthChecks == nil {
		p.HealthChecks = new(float64)
	}
	*p.HealthChecks += math.Min(1, probes/s.seconds())
}

// readEtcd fills the etcd figures: sizes and keys at the last scrape (the largest member's), requests
// added up over members (each serves its own clients), lease grants and revocations as the largest member
// counted them (every member applies them), watch streams and watchers added up.
func (p *Profile) readEtcd(members []Series) {
	e := &Etcd{GRPCRequests: map[string]float64{}}
	for _, s := range members {
		last := s.last()
		db, _ := last.value(mEtcdDBSize, nil)
		inUse, _ := last.value(mEtcdDBInUse, nil)
		keys, _ := last.value(mEtcdKeys, nil)
		e.DBSizeBytes, e.DBSizeInUseBytes, e.Keys = math.Max(e.DBSizeBytes, db), math.Max(e.DBSizeInUseBytes, inUse), math.Max(e.Keys, keys)
		streams, _ := last.value(mEtcdStreams, nil)
		watchers, _ := last.value(mEtcdWatchers, nil)
		e.WatchStreams += streams
		e.Watchers += watchers
		for m, v := range s.increase(mEtcdHandled, func(l map[string]string) string { return l["grpc_method"] }) {
			if m != "" && v > 0 {
				e.GRPCRequests[m] += v / s.seconds()
			}
		}
		g := s.increase(mEtcdLeaseGranted, func(map[string]string) string { return "" })[""] / s.seconds()
		r := s.increase(mEtcdLeaseRevoked, func(map[string]string) string { return "" })[""] / s.seconds()
		e.LeasesGranted, e.LeasesRevoked = math.Max(e.LeasesGranted, g), math.Max(e.LeasesRevoked, r)
	}
	for m, v := range e.GRPCRequests {
		e.GRPCRequests[m] = round(v, 4)
	}
	e.LeasesGranted, e.LeasesRevoked = round(e.LeasesGranted, 4), round(e.LeasesRevoked, 4)
	p.Etcd = e
}

// storedOverhead is what kube-apiserver adds to a created object before it stores it, in protobuf bytes:
// its uid (36 bytes and framing), creation time, and a managed-fields entry (manager, operation, API version,
// time and the fields set: about 200 bytes for an event). Measured: events created at 299 bytes a body were
// 544 bytes in etcd (Kubernetes 1.37.2, the scheduler's events).
const storedOverhead = 250

// assume states what stands in for the figures the kube workload needs and the metrics did not give.
func (p *Profile) assume() {
	need := func(figure string, v float64, ok bool, assumed float64, why string) {
		if ok && v > 0 {
			return
		}
		if _, done := p.assumed(figure); done {
			return
		}
		p.Assumptions = append(p.Assumptions, Assumption{Figure: figure, Assumed: assumed, Why: why})
	}
	get := func(r string) (*Resource, bool) { x, ok := p.Resources[r]; return x, ok && x != nil }
	nodes, ok := get("nodes")
	need("resources.nodes.objects", objectsOf(nodes), ok, 100, "no apiserver_storage_objects for nodes")
	pods, ok := get("pods")
	n := objectsOf(nodes)
	if n <= 0 {
		n = 100
	}
	need("resources.pods.objects", objectsOf(pods), ok, 30*n, "no apiserver_storage_objects for pods: 30 pods per node")
	need("resources.pods.etcd_requests_per_second.create", createsOf(pods), ok, 0,
		"no pod creates in the window (etcd_requests_total{operation=\"create\",resource=\"pods\"}): no churn")
	for _, r := range []string{"pods", "nodes", "leases", "events", "configmaps", "secrets", "namespaces"} {
		x, ok := get(r)
		if !ok || x.MeanBytes <= 0 {
			if ok && r != "events" && x.WatchEvents == 0 && x.Objects == 0 {
				continue
			}
			need("resources."+r+".mean_bytes", 0, false, defaultMeanBytes[r],
				"no apiserver_watch_events_sizes for "+r+sizeReason(r)+": the kube workload's default size")
		}
	}
}

func sizeReason(r string) string {
	if r == "events" {
		return " (events are rarely watched)"
	}
	return ""
}

// defaultMeanBytes are the means of the kube workload's default sizes (kube.DefaultSizes).
var defaultMeanBytes = map[string]float64{"pods": 5120, "nodes": 5000, "leases": 400, "events": 700, "configmaps": 4608, "secrets": 2560, "namespaces": 450}

func objectsOf(r *Resource) float64 {
	if r == nil {
		return 0
	}
	return r.Objects
}

func createsOf(r *Resource) float64 {
	if r == nil {
		return 0
	}
	return r.EtcdRequests["create"]
}

// resourceKey names the resource of an apiserver series, as the profile names resources: the plural alone
// for the core group and the built-in groups kube-apiserver stores under /registry/<plural>, plural.group
// for others. Releases label it resource (with group), type, kind or resource_prefix.
func resourceKey(l map[string]string) string {
	if r := l["resource"]; r != "" {
		if res, group, ok := strings.Cut(r, "."); ok && l["group"] == "" {
			return withGroup(res, group) // apiserver_storage_objects: leases.coordination.k8s.io
		}
		return withGroup(r, l["group"])
	}
	if t := l["type"]; t != "" {
		if i := strings.LastIndexByte(t, '.'); strings.HasPrefix(t, "*") && i >= 0 {
			return kindToResource(t[i+1:]) // *core.Pod
		}
		return t
	}
	if k := l["kind"]; k != "" {
		return withGroup(kindToResource(k), l["group"])
	}
	if p := strings.Trim(l["resource_prefix"], "/"); p != "" {
		parts := strings.Split(p, "/")
		if len(parts) >= 2 {
			return withGroup(parts[1], parts[0])
		}
		return parts[0]
	}
	return ""
}

// builtinGroups are the API groups whose resources kube-apiserver keeps under /registry/<plural>: the
// kube workload models them by plural alone.
var builtinGroups = map[string]bool{"": true, "core": true, "apps": true, "coordination.k8s.io": true, "events.k8s.io": true,
	"discovery.k8s.io": true, "rbac.authorization.k8s.io": true, "batch": true, "policy": true, "networking.k8s.io": true,
	"storage.k8s.io": true, "scheduling.k8s.io": true, "node.k8s.io": true, "flowcontrol.apiserver.k8s.io": true,
	"admissionregistration.k8s.io": true, "certificates.k8s.io": true, "autoscaling": true, "apiextensions.k8s.io": true,
	"apiregistration.k8s.io": true, "resource.k8s.io": true, "internal.apiserver.k8s.io": true, "storagemigration.k8s.io": true}

func withGroup(r, group string) string {
	if builtinGroups[group] {
		return r
	}
	return r + "." + group
}

// kindToResource guesses a kind's plural resource (Pod -> pods, NetworkPolicy -> networkpolicies).
func kindToResource(kind string) string {
	k := strings.ToLower(kind)
	switch {
	case k == "endpoints":
		return k
	case strings.HasSuffix(k, "y") && !strings.HasSuffix(k, "ey"):
		return k[:len(k)-1] + "ies"
	case strings.HasSuffix(k, "s"):
		return k + "es"
	}
	return k + "s"
}

func opResourceKey(l map[string]string) string { return l["operation"] + "\x00" + resourceKey(l) }

func round(v float64, digits int) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	f := math.Pow(10, float64(digits))
	return math.Round(v*f) / f
}

// Describe is a one-line description of the profile.
func (p *Profile) Describe() string {
	name := p.Name
	if name == "" {
		name = "profile"
	}
	return fmt.Sprintf("%s: %g nodes, %g pods, %d apiservers, %d resources, %.0f s window", name,
		objectsOf(p.Resources["nodes"]), objectsOf(p.Resources["pods"]), p.Source.Apiservers, len(p.Resources), p.Source.WindowSeconds)
}
