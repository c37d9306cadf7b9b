package profile

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/workloads/kube"
)

// series reads testdata's scrapes of one process: NAME.1.prom, NAME.2.prom.
func series(t *testing.T, name string) Series {
	t.Helper()
	s := Series{Process: name}
	for _, n := range []string{"1", "2"} {
		sc, err := ReadScrape(filepath.Join("testdata", name+"."+n+".prom"))
		if err != nil {
			t.Fatal(err)
		}
		s.Scrapes = append(s.Scrapes, sc)
	}
	return s
}

func testdataProfile(t *testing.T) *Profile {
	t.Helper()
	p, err := Build([]Series{series(t, "kube-apiserver-0"), series(t, "kube-apiserver-1")}, []Series{series(t, "etcd-0")}, Options{Name: "testdata"})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBuildFigures checks a profile of the recorded scrapes in testdata (two apiservers and one etcd member,
// scraped 120 s apart, by their headers) against figures worked out by hand from the files.
func TestBuildFigures(t *testing.T) {
	p := testdataProfile(t)
	pods := p.Resources["pods"]
	checks := []struct {
		name      string
		got, want float64
	}{
		{"window", p.Source.WindowSeconds, 120},
		// Counts at the last scrape, the largest any apiserver reports: 1500 (apiserver 0) over 1498.
		{"pods objects", pods.Objects, 1500},
		{"nodes objects", p.Resources["nodes"].Objects, 50},
		// apiserver_storage_objects{resource="leases.coordination.k8s.io"} is the leases resource.
		{"leases objects", p.Resources["leases"].Objects, 55},
		// etcd_requests_total, both apiservers: creates (220-100)+(170-50) = 240 in 120 s.
		{"pod creates/s", pods.EtcdRequests["create"], 2},
		{"pod updates/s", pods.EtcdRequests["update"], (300.0 + 300) / 120},
		{"pod list pages/s", pods.EtcdRequests["list"], 30.0 / 120},
		{"lease updates/s", p.Resources["leases"].EtcdRequests["update"], (600.0 + 600) / 120},
		// apiserver_watch_events_sizes: (1,260,000 + 1,280,000) bytes in (600 + 600) events.
		{"pods mean bytes", pods.MeanBytes, 2117},
		{"pods watch events/s", pods.WatchEvents, 1200.0 / 120},
		// etcd_bookmark_total: 12 bookmarks in 120 s, apiserver 0 only.
		{"pods bookmarks/s", pods.Bookmarks, 0.1},
		// apiserver_resource_objects (Kubernetes 1.34 and later) with the size estimate of the stored
		// objects: 24000 bytes over 12 configmaps; nodes' estimate over apiserver_storage_objects' 50.
		{"configmaps objects", p.Resources["configmaps"].Objects, 12},
		{"configmaps mean bytes", p.Resources["configmaps"].MeanBytes, 2000},
		{"nodes mean bytes", p.Resources["nodes"].MeanBytes, 5250},
		// apiserver_longrunning_requests{verb="WATCH"}: 3 + 2; the LIST series do not count.
		{"pods watchers", pods.Watchers, 5},
		// apiserver_storage_list_*: 30 lists fetched 45000 and returned 9000 objects.
		{"pods lists/s", pods.Lists.PerSecond, 0.25},
		{"pods fetched/list", pods.Lists.FetchedPerList, 1500},
		{"pods returned/list", pods.Lists.ReturnedPerList, 300},
		{"pods cache lists/s", pods.CacheLists, 120.0 / 120},
		{"pods cache initializations", pods.CacheInitializations, 1},
		{"etcd db size", p.Etcd.DBSizeBytes, 12e6},
		{"etcd keys", p.Etcd.Keys, 1700},
		// Every gRPC code counts: (3600 OK + 12 Unavailable) Ranges in 120 s.
		{"etcd Range/s", p.Etcd.GRPCRequests["Range"], 3612.0 / 120},
		{"etcd Txn/s", p.Etcd.GRPCRequests["Txn"], 2400.0 / 120},
		{"etcd Compact/s", p.Etcd.GRPCRequests["Compact"], 0.0333},
		{"etcd watchers", p.Etcd.Watchers, 40},
		{"etcd watch streams", p.Etcd.WatchStreams, 6},
		{"leases granted/s", p.Etcd.LeasesGranted, 0.5},
		{"leases revoked/s", p.Etcd.LeasesRevoked, 0.25},
		// Events were created through apiserver 0 alone (apiserver 1 has no create/events series); pods
		// through both, which leaves the figure out.
		{"events created through", float64(p.Resources["events"].CreatedThrough), 1},
		{"pods created through", float64(pods.CreatedThrough), 0},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
	// Probes: apiserver 0's /readyz 240 times in 120 s (its prober reads etcd once a second at most),
	// apiserver 1's /livez 60 times; the pods' status patches are not probes.
	if p.HealthChecks == nil || *p.HealthChecks != 1.5 {
		t.Errorf("etcd health checks %v, want 1 + 0.5 a second", p.HealthChecks)
	}
	// Leases had no watch event in the window: the lifetime mean (1,200,000 / 3000) stands in, stated.
	if v, ok := p.assumed("resources.leases.mean_bytes"); !ok || v != 400 {
		t.Errorf("leases mean bytes assumption = %v, %v; want 400", v, ok)
	}
	if _, ok := p.assumed("resources.nodes.mean_bytes"); ok {
		t.Error("nodes mean bytes was measured (the size estimate), yet assumed")
	}
	// Events are neither estimated nor watched: their create bodies' mean ((90000-18000)/(300-60) = 300
	// bytes; the patches' do not count) and what the apiserver adds to a stored object (250).
	if v, ok := p.assumed("resources.events.mean_bytes"); !ok || v != 550 {
		t.Errorf("events mean bytes assumption = %v, %v; want 300 + 250", v, ok)
	}
	if _, ok := p.assumed("resources.pods.mean_bytes"); ok {
		t.Error("pods mean bytes was measured, yet assumed")
	}
}

// TestOptionsFromProfile checks the kube workload the testdata profile drives, at 1x, 2x and 2x rates.
func TestOptionsFromProfile(t *testing.T) {
	p := testdataProfile(t)
	o, err := p.Options(Scale{Factor: 1})
	if err != nil {
		t.Fatal(err)
	}
	// 9 namespaces less the 4 every cluster has; a namespace's 300 pods are one 500-pod page, so 0.25
	// pages/s are 0.25 lists/s; etcd compacted every 30 s.
	if o.Apiservers != 2 || o.Nodes != 50 || o.PodsPerNode != 30 || o.Namespaces != 5 || o.Churn != 2 || o.ListRate != 0.25 || o.CompactionInterval != 30*time.Second {
		t.Errorf("1x options = %+v", o)
	}
	// apiserver_cache_list_total: one consistent list of pods a second from the watch caches.
	if o.CacheListRate != 1 {
		t.Errorf("cache list rate %v, want 1", o.CacheListRate)
	}
	// etcd served no Status in the window: the emulation sends none.
	if o.StatusRate != -1 {
		t.Errorf("status rate %v, want none (-1)", o.StatusRate)
	}
	if !strings.Contains(o.ObjectSizes, "pods=1587-2646") || !strings.Contains(o.ObjectSizes, "leases=300-500") ||
		!strings.Contains(o.ObjectSizes, "configmaps=1500-2500,large-configmaps=1500-2500") {
		t.Errorf("object sizes %q: want pods around 2117, leases around the assumed 400, every configmap around 2000", o.ObjectSizes)
	}
	// Node lease renewals: 10 lease updates a second less the control plane's own (2 leader elections
	// every 2 s, 2 apiserver identities every 10 s).
	if math.Abs(o.NodeLeases-8.8) > 1e-9 {
		t.Errorf("node leases %g/s, want 10 - 1.2", o.NodeLeases)
	}
	// No node status update in the window: none, not every kubelet's every 5 minutes.
	if o.NodeStatus != -1 {
		t.Errorf("node status %g/s, want none (-1)", o.NodeStatus)
	}
	if o.HealthChecks != 1.5 {
		t.Errorf("health checks %g/s, want the probes' 1.5", o.HealthChecks)
	}
	// The cluster's 10 secrets (apiserver_resource_objects), not two a namespace.
	if o.Secrets != 10 {
		t.Errorf("secrets %d, want 10", o.Secrets)
	}
	// Events through the one apiserver that created them; no lease read in the window (updates only):
	// the leader elections read none.
	if o.EventApiservers != 1 || o.LeaseReads != -1 {
		t.Errorf("event apiservers %d and lease reads %g, want 1 and none (-1)", o.EventApiservers, o.LeaseReads)
	}
	// Reads of the current revision: namespaces' (34-10)/120 = 0.2 a second, at that rate; the custom
	// resource widgets is not watched by the workload: left out.
	if !reflect.DeepEqual(o.CacheReads, map[string]float64{"namespaces": 0.2}) {
		t.Errorf("cache reads %v, want namespaces at 0.2/s", o.CacheReads)
	}
	// Pod reads: (700-100)/120 = 5 a second for 2 creates, 2.5 DELETE calls a pod.
	if o.DeleteCalls != 2.5 {
		t.Errorf("delete calls %g, want 2.5", o.DeleteCalls)
	}
	// Pod deletes: (580-100)/120 = 4 a second, 2 a pod: the kubelet's removal, half a third call's, and
	// half a pod's stale removal.
	if o.DeleteConflicts != 0.5 {
		t.Errorf("delete conflicts %g, want 0.5", o.DeleteConflicts)
	}
	// Events kept: 1440 stored at the end, less the (300-60)/120 = 2 created a second over the 120 s
	// window: 1200 existed when it began.
	if o.Events != 1200 || o.EventsPerPod != 1 {
		t.Errorf("events %d and %g per pod, want 1200 kept and 2/2 = 1 per pod", o.Events, o.EventsPerPod)
	}
	// The resources the workload does not model, by storage prefix: apiservices under their group,
	// 48000/40 = 1200 bytes each; flowschemas (apiserver_storage_objects, no size: 1024); the custom
	// resource widgets.example.com under example.com/widgets.
	want := []kube.Others{{Prefix: "apiregistration.k8s.io/apiservices", Objects: 40, Bytes: 1200},
		{Prefix: "flowschemas", Objects: 13, Bytes: 1024}, {Prefix: "example.com/widgets", Objects: 3, Bytes: 1024}}
	if !reflect.DeepEqual(o.Others, want) {
		t.Errorf("others %+v, want %+v", o.Others, want)
	}
	two, _ := p.Options(Scale{Factor: 2})
	// At 2x the count timers' reads (2 apiservers once a minute) stay, the consistent lists' double.
	if got, want := two.CacheReads["namespaces"], round(2.0/60+2*(0.2-2.0/60), 4); got != want {
		t.Errorf("2x: namespaces' cache reads %g/s, want %g", got, want)
	}
	if two.Events != 2400 || two.Others[0].Objects != 80 || two.Others[2].Objects != 6 {
		t.Errorf("2x: events %d, others %+v; want 2400 events, 80 apiservices and 6 widgets", two.Events, two.Others)
	}
	if two.Nodes != 100 || two.PodsPerNode != 30 || two.Namespaces != 10 || two.Churn != 4 || two.ListRate != 0.5 || two.Apiservers != 2 {
		t.Errorf("2x options = %+v", two)
	}
	rates, _ := p.Options(Scale{Factor: 2, RatesOnly: true})
	// Events kept follow the rates (twice the events in an hour); the other objects stay.
	if rates.Events != 2400 || rates.Others[0].Objects != 40 {
		t.Errorf("2x rates: events %d, others %+v; want 2400 events and 40 apiservices", rates.Events, rates.Others)
	}
	if rates.Nodes != 50 || rates.Namespaces != 5 || rates.Churn != 4 || rates.ListRate != 0.5 {
		t.Errorf("2x rates options = %+v", rates)
	}
	if _, err := p.Options(Scale{Factor: -1}); !outcome.IsUsage(err) {
		t.Errorf("--scale -1: %v, want a usage error", err)
	}
	if _, err := o.Resolve(2 * time.Minute); err != nil {
		t.Errorf("the profile's options do not resolve: %v", err)
	}
}

// TestRoundTrip writes the profile and reads it back.
func TestRoundTrip(t *testing.T) {
	p := testdataProfile(t)
	data, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "# Shareable: ") {
		t.Error("the profile's header does not say it is shareable")
	}
	q, err := Parse("round-trip", data)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := p.Options(Scale{Factor: 1.5})
	b, _ := q.Options(Scale{Factor: 1.5})
	if !reflect.DeepEqual(a, b) {
		t.Errorf("options after a round trip: %+v, want %+v", b, a)
	}
}

// TestBadInput checks that input a profile cannot use is one usage error (exit 2), or a stated assumption.
func TestBadInput(t *testing.T) {
	a0, e0 := series(t, "kube-apiserver-0"), series(t, "etcd-0")
	one := Series{Process: "kube-apiserver-0", Scrapes: a0.Scrapes[:1]}
	same := Series{Process: "kube-apiserver-0", Scrapes: []Scrape{a0.Scrapes[0], a0.Scrapes[0]}}
	swapped := Series{Process: "kube-apiserver-0", Scrapes: []Scrape{e0.Scrapes[0], e0.Scrapes[1]}}
	for _, c := range []struct {
		name       string
		apiservers []Series
		etcd       []Series
		want       string
	}{
		{"one scrape only", []Series{one}, nil, "one scrape only"},
		{"scrapes at one time", []Series{same}, nil, "is not later than"},
		{"no apiserver", nil, []Series{e0}, "no kube-apiserver scrapes"},
		{"an etcd scrape as an apiserver's", []Series{swapped}, nil, "not a kube-apiserver's metrics"},
		{"an apiserver scrape as etcd's", []Series{a0}, []Series{{Process: "etcd-0", Scrapes: a0.Scrapes}}, "not an etcd member's metrics"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Build(c.apiservers, c.etcd, Options{})
			if !outcome.IsUsage(err) || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
				t.Errorf("error %v: want one usage line with %q", err, c.want)
			}
		})
	}
	t.Run("not Prometheus text", func(t *testing.T) {
		for _, text := range []string{"<html>login</html>\n", "{\"kind\":\"Status\"}\n", ""} {
			if _, err := ParseScrape("x.prom", []byte(text), time.Now()); !outcome.IsUsage(err) || !strings.Contains(err.Error(), "not Prometheus text") {
				t.Errorf("%q: %v, want a usage error", text, err)
			}
		}
	})
	t.Run("a restart between scrapes", func(t *testing.T) {
		// apiserver 1 restarted: its start time moved and its counters began again from zero.
		after := strings.NewReplacer("process_start_time_seconds 1764320005", "process_start_time_seconds 1764320090",
			`operation="create",resource="pods"} 170`, `operation="create",resource="pods"} 30`).Replace(readFile(t, "kube-apiserver-1.2.prom"))
		restarted, err := ParseScrape("restarted.prom", []byte(after), time.Time{})
		if err != nil {
			t.Fatal(err)
		}
		a1 := series(t, "kube-apiserver-1")
		a1.Scrapes[1] = restarted
		p, err := Build([]Series{a0, a1}, nil, Options{})
		if err != nil {
			t.Fatal(err)
		}
		// apiserver 0 created 120 pods; apiserver 1 30 since its restart (counted from zero).
		if got := p.Resources["pods"].EtcdRequests["create"]; got != 150.0/120 {
			t.Errorf("pod creates/s across a restart = %v, want %v", got, 150.0/120)
		}
		if !strings.Contains(strings.Join(p.Source.Notes, "\n"), "kube-apiserver-1 restarted between scrape 1 and 2") {
			t.Errorf("notes %q do not state the restart", p.Source.Notes)
		}
	})
	t.Run("profiles that are not this format", func(t *testing.T) {
		good, err := testdataProfile(t).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct{ name, text, want string }{
			{"newer", strings.Replace(string(good), "version: 1", "version: 2", 1), "newer than this chaosbench reads"},
			{"other format", strings.Replace(string(good), "format: chaosbench/kube-profile", "format: other", 1), "not a kube workload profile"},
			{"not YAML", "{{{", "not a kube workload profile"},
			{"negative", strings.Replace(string(good), "objects: 1500", "objects: -1", 1), "negative figures"},
		} {
			if _, err := Parse(c.name, []byte(c.text)); !outcome.IsUsage(err) || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: %v, want a usage error with %q", c.name, err, c.want)
			}
		}
	})
}

// TestResourceKey names resources from every labelling releases use.
func TestResourceKey(t *testing.T) {
	for _, c := range []struct {
		labels map[string]string
		want   string
	}{
		{map[string]string{"resource": "pods"}, "pods"},
		{map[string]string{"resource": "leases", "group": "coordination.k8s.io"}, "leases"},
		{map[string]string{"resource": "leases.coordination.k8s.io"}, "leases"},
		{map[string]string{"resource": "widgets", "group": "example.com"}, "widgets.example.com"},
		{map[string]string{"type": "*core.Pod"}, "pods"},
		{map[string]string{"kind": "NetworkPolicy", "group": "networking.k8s.io"}, "networkpolicies"},
		{map[string]string{"kind": "Endpoints"}, "endpoints"},
		{map[string]string{"resource_prefix": "/pods"}, "pods"},
		{map[string]string{"resource_prefix": "/example.com/widgets"}, "widgets.example.com"},
	} {
		if got := resourceKey(c.labels); got != c.want {
			t.Errorf("resourceKey(%v) = %q, want %q", c.labels, got, c.want)
		}
	}
}

func readFile(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// TestPresetProfiles checks that every preset's profile drives the preset's own plan at 1x: a preset and
// its profile are one description of traffic.
func TestPresetProfiles(t *testing.T) {
	for _, preset := range kube.Presets {
		t.Run(preset, func(t *testing.T) {
			cfg, err := kube.Options{Preset: preset}.Resolve(3 * time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			data, err := FromConfig(preset, cfg, 1).Marshal()
			if err != nil {
				t.Fatal(err)
			}
			p, err := Parse(preset, data)
			if err != nil {
				t.Fatal(err)
			}
			o, err := p.Options(Scale{Factor: 1})
			if err != nil {
				t.Fatal(err)
			}
			got, err := o.Resolve(3 * time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			want, have := cfg.Plan(1), got.Plan(1)
			if len(want) != len(have) {
				t.Fatalf("plan of %d operations from the profile, %d from the preset", len(have), len(want))
			}
			for i := range want {
				if want[i].Op != have[i].Op || math.Abs(want[i].Rate-have[i].Rate) > 1e-3*want[i].Rate {
					t.Errorf("%s: %s at %g/s from the profile, %s at %g/s from the preset", want[i].Actor, have[i].Op, have[i].Rate, want[i].Op, want[i].Rate)
				}
			}
			if got.Nodes != cfg.Nodes || got.Pods() != cfg.Pods() || got.Namespaces != cfg.Namespaces || got.Sizes[kube.ResPods].Mean() != cfg.Sizes[kube.ResPods].Mean() {
				t.Errorf("profile's cluster %s, preset's %s", got, cfg)
			}
			// The configmaps' bytes are kept: every configmap takes the mean of the preset's, the large
			// ones' included.
			if g, w := got.MeanObjectBytes(kube.ResConfigMaps), cfg.MeanObjectBytes(kube.ResConfigMaps); math.Abs(g-w) > 0.01*w {
				t.Errorf("configmaps' mean %.0f bytes from the profile, %.0f from the preset", g, w)
			}
		})
	}
}
