package chaosbench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"html"
	"io"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/clusters/controlplane"
	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/workloads/kube"
	"github.com/etcd-chaosbench/chaosbench/workloads/kubeapi"
)

// FidelityTolerance is how far a real/emulated ratio may be from 1 and still count as a match.
const FidelityTolerance = 0.15

// FidelityOptions configures Fidelity.
type FidelityOptions struct {
	// Preset is the kube size preset both runs use.
	Preset string
	// Duration is each run's load; Members each cluster's size.
	Duration time.Duration
	Members  int
	// KubeVersion is the real control plane's release (default kubebuild.DefaultVersion).
	KubeVersion string
	// Out receives both runs' directories, fidelity.md, fidelity.html and fidelity.json.
	Out string
	// Seed seeds both runs.
	Seed int64
}

// FidelityRow is one quantity measured at etcd in both runs, per second unless it says otherwise.
type FidelityRow struct {
	Group    string  `json:"group"`
	Name     string  `json:"name"`
	Emulated float64 `json:"emulated"`
	Real     float64 `json:"real"`
	// Ratio is Real/Emulated; NaN (null in JSON) when either side is zero.
	Ratio float64 `json:"-"`
	Match bool    `json:"match"`
}

// FidelityReport is the comparison.
type FidelityReport struct {
	Preset string        `json:"preset"`
	Rows   []FidelityRow `json:"rows"`
	// Score is the share of rows measured on both sides whose ratio is within FidelityTolerance.
	Score      float64 `json:"score"`
	Comparable int     `json:"comparable"`
	Matching   int     `json:"matching"`
}

// etcdSample is what fidelity reads from etcd at the start and the end of a load.
type etcdSample struct {
	at       time.Time
	families []map[string]*dto.MetricFamily
	// prefixes counts keys and value bytes per /registry/<resource> at the sample (end only).
	keys, bytes map[string]float64
}

// Fidelity runs the kube workload and the real control plane with the same preset, one after the other on
// fresh clusters without faults, and compares what reached etcd during each load.
func Fidelity(ctx context.Context, opts FidelityOptions, env Env) (*FidelityReport, error) {
	if opts.Preset == "" {
		opts.Preset = "small"
	}
	if opts.Duration <= 0 {
		opts.Duration = 2 * time.Minute
	}
	if opts.Members == 0 {
		opts.Members = 1
	}
	if opts.Out == "" {
		opts.Out = filepath.Join("results", time.Now().Format("20060102-150405")+"-fidelity-"+opts.Preset)
	}
	if opts.Seed == 0 {
		opts.Seed = newSeed()
	}
	if env.Out == nil {
		env.Out = io.Discard
	}
	samples := map[string][2]*etcdSample{}
	mids := map[string]*etcdSample{}
	var runs []string
	for _, wl := range []string{"kube", kubeapi.Name} {
		s := DefaultScenario()
		s.Workload, s.Kube.Preset, s.Members, s.Duration, s.Seed = wl, opts.Preset, opts.Members, opts.Duration, opts.Seed
		s.KubeVersion = opts.KubeVersion
		s.Faults.Schedule = []string{"none"}
		s.History, s.Check = false, false
		s.Progress = "none"
		s.Out = filepath.Join(opts.Out, wl)
		var pair [2]*etcdSample
		// Watchers are counted halfway through the load, while both sides hold their watches (the
		// emulation closes its own when the load ends).
		var mid *etcdSample
		midDone := make(chan struct{})
		runEnv := env
		runEnv.RequestShapes = true
		runEnv.LoadBegan = func(ctx context.Context, c clusters.Cluster) {
			pair[0] = sampleEtcd(ctx, c, false)
			go func() {
				defer close(midDone)
				select {
				case <-time.After(opts.Duration / 2):
					mid = sampleEtcd(ctx, c, false)
				case <-ctx.Done():
				}
			}()
		}
		runEnv.LoadEnded = func(ctx context.Context, c clusters.Cluster) { pair[1] = sampleEtcd(ctx, c, true) }
		fmt.Fprintf(env.Out, "fidelity: %s workload, preset %s, %s\n", wl, opts.Preset, opts.Duration)
		_, err := Run(ctx, s, runEnv)
		if pair[0] != nil {
			<-midDone
		}
		if err != nil {
			return nil, fmt.Errorf("fidelity: the %s run: %w", wl, err)
		}
		if pair[0] == nil || pair[1] == nil || mid == nil {
			return nil, fmt.Errorf("fidelity: the %s run did not sample etcd", wl)
		}
		samples[wl] = pair
		mids[wl] = mid
		runs = append(runs, s.Out)
	}
	emu, real := samples["kube"], samples[kubeapi.Name]
	rep := &FidelityReport{Preset: opts.Preset}
	add := func(group, name string, e, r float64) {
		if e == 0 && r == 0 {
			return // neither run used it (most gRPC methods)
		}
		row := FidelityRow{Group: group, Name: name, Emulated: e, Real: r, Ratio: math.NaN()}
		if e > 0 && r > 0 {
			row.Ratio = r / e
			row.Match = math.Abs(row.Ratio-1) <= FidelityTolerance
			rep.Comparable++
			if row.Match {
				rep.Matching++
			}
		}
		rep.Rows = append(rep.Rows, row)
	}
	// Per gRPC method, and etcd's own MVCC counters, per second of load.
	methods := map[string]bool{}
	for _, p := range [][2]*etcdSample{emu, real} {
		for m := range counterBy(p[1], "grpc_server_handled_total", "grpc_method") {
			methods[m] = true
		}
	}
	for _, m := range sortedKeys(methods) {
		add("gRPC requests/s", m, rateBy(emu, "grpc_server_handled_total", "grpc_method")[m], rateBy(real, "grpc_server_handled_total", "grpc_method")[m])
	}
	for _, c := range []string{"etcd_mvcc_range_total", "etcd_mvcc_put_total", "etcd_mvcc_txn_total", "etcd_mvcc_delete_total",
		"etcd_debugging_mvcc_events_total"} {
		add("etcd counters/s", strings.TrimPrefix(c, "etcd_"), rateBy(emu, c, "")[""], rateBy(real, c, "")[""])
	}
	add("etcd counters/s", "client bytes received", rateBy(emu, "etcd_network_client_grpc_received_bytes_total", "")[""], rateBy(real, "etcd_network_client_grpc_received_bytes_total", "")[""])
	add("etcd counters/s", "client bytes sent", rateBy(emu, "etcd_network_client_grpc_sent_bytes_total", "")[""], rateBy(real, "etcd_network_client_grpc_sent_bytes_total", "")[""])
	meanReq := func(p [2]*etcdSample) float64 {
		msgs := rateBy(p, "grpc_server_msg_received_total", "")[""]
		if msgs == 0 {
			return 0
		}
		return rateBy(p, "etcd_network_client_grpc_received_bytes_total", "")[""] / msgs
	}
	add("sizes", "mean request message bytes", meanReq(emu), meanReq(real))
	for _, g := range []string{"etcd_debugging_mvcc_watcher_total", "etcd_debugging_mvcc_watch_stream_total", "etcd_debugging_mvcc_slow_watcher_total"} {
		add("watch (halfway)", strings.TrimPrefix(g, "etcd_debugging_mvcc_"), gaugeAt(mids["kube"], g), gaugeAt(mids[kubeapi.Name], g))
	}
	// Per request shape (clusters/shapes): what the requests ask, per second of load.
	emuShapes, realShapes := map[string]float64{}, map[string]float64{}
	for i, wl := range []string{"kube", kubeapi.Name} {
		counts, err := readShapes(runs[i])
		if err != nil {
			return nil, err
		}
		p := samples[wl]
		secs := p[1].at.Sub(p[0].at).Seconds()
		for k, v := range counts {
			if secs > 0 {
				[]map[string]float64{emuShapes, realShapes}[i][k] = float64(v) / secs
			}
		}
	}
	shapeNames := map[string]bool{}
	for _, m := range []map[string]float64{emuShapes, realShapes} {
		for k := range m {
			shapeNames[k] = true
		}
	}
	for _, k := range sortedKeys(shapeNames) {
		add("request shapes/s", k, emuShapes[k], realShapes[k])
	}
	// Per key prefix at the end of the load: objects and mean value size.
	prefixes := map[string]bool{}
	for k := range emu[1].keys {
		prefixes[k] = true
	}
	for k := range real[1].keys {
		prefixes[k] = true
	}
	for _, p := range sortedKeys(prefixes) {
		add("keys (at the end)", p, emu[1].keys[p], real[1].keys[p])
	}
	for _, p := range sortedKeys(prefixes) {
		mean := func(s *etcdSample) float64 {
			if s.keys[p] == 0 {
				return 0
			}
			return s.bytes[p] / s.keys[p]
		}
		add("mean value bytes", p, mean(emu[1]), mean(real[1]))
	}
	// Per apiserver operation and resource: the emulation's recorded requests against the apiservers'
	// own etcd request metrics.
	emuOps, err := emulatedOps(runs[0])
	if err != nil {
		return nil, err
	}
	realOps, err := realOps(runs[1])
	if err != nil {
		return nil, err
	}
	ops := map[string]bool{}
	for k := range emuOps {
		ops[k] = true
	}
	for k := range realOps {
		ops[k] = true
	}
	for _, k := range sortedKeys(ops) {
		add("apiserver etcd requests/s", k, emuOps[k], realOps[k])
	}
	if rep.Comparable > 0 {
		rep.Score = float64(rep.Matching) / float64(rep.Comparable)
	}
	if err := rep.write(opts.Out, runs); err != nil {
		return nil, err
	}
	fmt.Fprintf(env.Out, "fidelity score %.0f%%: %d of %d quantities within ±%.0f%%; table in %s\n",
		100*rep.Score, rep.Matching, rep.Comparable, 100*FidelityTolerance, filepath.Join(opts.Out, "fidelity.md"))
	return rep, nil
}

// sampleEtcd scrapes every member's metrics and, at the end, counts keys and bytes per prefix.
func sampleEtcd(ctx context.Context, c clusters.Cluster, prefixes bool) *etcdSample {
	s := &etcdSample{at: time.Now()}
	for _, p := range clusters.Processes(c) {
		if fams, err := scrapeMetrics(ctx, p.MetricsURL()+"/metrics"); err == nil {
			s.families = append(s.families, fams)
		}
	}
	if prefixes {
		s.keys, s.bytes = registryPrefixes(ctx, c)
	}
	return s
}

func scrapeMetrics(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	var p expfmt.TextParser
	return p.TextToMetricFamilies(resp.Body)
}

// registryPrefixes reads the whole key space in pages and counts keys and value bytes per resource:
// /registry/<resource>/..., compact_rev_key and anything else under their own names.
func registryPrefixes(ctx context.Context, c clusters.Cluster) (keys, size map[string]float64) {
	keys, size = map[string]float64{}, map[string]float64{}
	cli, err := clientv3.New(clusters.ClientConfig(c))
	if err != nil {
		return keys, size
	}
	defer cli.Close()
	from := "\x00"
	for {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		resp, err := cli.Get(rctx, from, clientv3.WithRange("\x00"), clientv3.WithLimit(1000), clientv3.WithSerializable())
		cancel()
		if err != nil {
			return keys, size
		}
		for _, kv := range resp.Kvs {
			p := prefixOf(string(kv.Key))
			keys[p]++
			size[p] += float64(len(kv.Value))
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return keys, size
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// prefixOf names a key's resource: "/registry/pods/ns/name" -> "/registry/pods"; the apiserver's
// /registry/<group>/<plural> keys of API groups keep two levels when the first has a dot.
func prefixOf(k string) string {
	parts := strings.SplitN(k, "/", 5)
	if len(parts) < 3 || parts[1] != "registry" {
		return k
	}
	if len(parts) > 3 && strings.Contains(parts[2], ".") {
		return "/registry/" + parts[2] + "/" + parts[3]
	}
	return "/registry/" + parts[2]
}

// counterBy sums a family's values per label value (label "" sums everything).
func counterBy(s *etcdSample, name, label string) map[string]float64 {
	out := map[string]float64{}
	for _, fams := range s.families {
		f := fams[name]
		if f == nil {
			continue
		}
		for _, m := range f.GetMetric() {
			k := ""
			for _, l := range m.GetLabel() {
				if l.GetName() == label {
					k = l.GetValue()
				}
			}
			switch {
			case m.GetCounter() != nil:
				out[k] += m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				out[k] += m.GetGauge().GetValue()
			}
		}
	}
	return out
}

// rateBy is the per-second increase of a counter between a pair of samples, per label value.
func rateBy(p [2]*etcdSample, name, label string) map[string]float64 {
	secs := p[1].at.Sub(p[0].at).Seconds()
	before, after := counterBy(p[0], name, label), counterBy(p[1], name, label)
	out := map[string]float64{}
	for k, v := range after {
		if secs > 0 {
			out[k] = (v - before[k]) / secs
		}
	}
	return out
}

func gaugeAt(s *etcdSample, name string) float64 { return counterBy(s, name, "")[""] }

// emulatedOps reads a kube run's request rates per operation/resource from its summary.
func emulatedOps(dir string) (map[string]float64, error) {
	data, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		return nil, fmt.Errorf("fidelity: %w", err)
	}
	var s struct {
		Operations map[string]struct {
			Throughput float64 `json:"throughput"`
		} `json:"operations"`
	}
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, fmt.Errorf("fidelity: %s: %w", dir, err)
	}
	out := map[string]float64{}
	for op, o := range s.Operations {
		if strings.HasPrefix(op, "watch-event/") || strings.HasPrefix(op, "wait/") {
			continue // not requests
		}
		out[apiserverOpName(op)] += o.Throughput
	}
	return out, nil
}

// apiserverOpName names an emulated operation as the apiserver's etcd request metrics name it: resources by
// their API name (nodes, not the minions key; the endpoint leases by the type their storage names), verbs
// by the storage layer's operation names.
func apiserverOpName(op string) string {
	verb, res, ok := strings.Cut(op, "/")
	if !ok {
		return op
	}
	switch res {
	case "minions":
		res = "nodes"
	case "masterleases": // the endpoint reconcilers' storages name their objects' type
		res = "apiServerIPInfo"
	case "peerserverleases":
		res = "apiServerPeerIPInfo"
	}
	if verb == "count" {
		verb = "listWithCount"
	}
	if verb == "current-rv" {
		verb = "getCurrentResourceVersion"
	}
	return verb + "/" + res
}

// realOps reads the apiservers' etcd request rates per operation/resource from a controlplane run.
func realOps(dir string) (map[string]float64, error) {
	data, err := os.ReadFile(filepath.Join(dir, ControlPlaneReport))
	if err != nil {
		return nil, fmt.Errorf("fidelity: %w", err)
	}
	var rep controlplane.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		return nil, fmt.Errorf("fidelity: %s: %w", dir, err)
	}
	out := map[string]float64{}
	for _, l := range rep.Etcd {
		out[l.Verb+"/"+l.Resource] += l.PerSec
	}
	return out, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func ratioText(r FidelityRow) string {
	if math.IsNaN(r.Ratio) {
		return "-"
	}
	return fmt.Sprintf("%.2f", r.Ratio)
}

// write writes fidelity.md, fidelity.html and fidelity.json into dir.
func (rep *FidelityReport) write(dir string, runs []string) error {
	var md bytes.Buffer
	fmt.Fprintf(&md, "# Fidelity of the kube workload, preset %s\n\n", rep.Preset)
	fmt.Fprintf(&md, "Score: **%.0f%%** (%d of %d quantities measured in both runs within ±%.0f%%). Emulated: %s; real: %s.\n\n",
		100*rep.Score, rep.Matching, rep.Comparable, 100*FidelityTolerance, runs[0], runs[1])
	fmt.Fprintf(&md, "| group | quantity | emulated | real | real/emulated | within ±%.0f%% |\n| --- | --- | ---: | ---: | ---: | --- |\n", 100*FidelityTolerance)
	for _, r := range rep.Rows {
		ok := ""
		switch {
		case math.IsNaN(r.Ratio):
			ok = "one side only"
		case r.Match:
			ok = "yes"
		default:
			ok = "**no**"
		}
		fmt.Fprintf(&md, "| %s | %s | %.3g | %.3g | %s | %s |\n", r.Group, r.Name, r.Emulated, r.Real, ratioText(r), ok)
	}
	var page bytes.Buffer
	fmt.Fprintf(&page, "<!doctype html><meta charset=utf-8><title>fidelity %s</title><style>body{font-family:sans-serif}td,th{padding:2px 8px;text-align:right}td:nth-child(-n+2){text-align:left}.no{background:#fdd}.yes{background:#dfd}</style>\n", html.EscapeString(rep.Preset))
	fmt.Fprintf(&page, "<h1>Fidelity of the kube workload, preset %s</h1><p>Score %.0f%%: %d of %d quantities within ±%.0f%%.</p>\n<table><tr><th>group<th>quantity<th>emulated<th>real<th>real/emulated</tr>\n",
		html.EscapeString(rep.Preset), 100*rep.Score, rep.Matching, rep.Comparable, 100*FidelityTolerance)
	for _, r := range rep.Rows {
		class := "yes"
		if !r.Match {
			class = "no"
		}
		if math.IsNaN(r.Ratio) {
			class = ""
		}
		fmt.Fprintf(&page, "<tr class=%q><td>%s<td>%s<td>%.3g<td>%.3g<td>%s</tr>\n", class, html.EscapeString(r.Group), html.EscapeString(r.Name), r.Emulated, r.Real, ratioText(r))
	}
	page.WriteString("</table>\n")
	js, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("fidelity: %w", err)
	}
	for name, data := range map[string][]byte{"fidelity.md": md.Bytes(), "fidelity.html": page.Bytes(), "fidelity.json": js} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return fmt.Errorf("fidelity: %w", err)
		}
	}
	return nil
}

// ValidateFidelity checks the options before anything starts.
func ValidateFidelity(opts FidelityOptions) error {
	if opts.Preset != "" && !strings.Contains(","+strings.Join(kube.Presets, ",")+",", ","+opts.Preset+",") {
		return outcome.Usagef("--preset %q: %s", opts.Preset, strings.Join(kube.Presets, ", "))
	}
	s := Scenario{KubeVersion: opts.KubeVersion}
	_, err := s.kubeRelease()
	return err
}

// readShapes reads the request shapes a run counted (ShapesFile).
func readShapes(dir string) (map[string]int64, error) {
	data, err := os.ReadFile(filepath.Join(dir, ShapesFile))
	if err != nil {
		return nil, fmt.Errorf("fidelity: %w", err)
	}
	var counts map[string]int64
	if err := json.Unmarshal(data, &counts); err != nil {
		return nil, fmt.Errorf("fidelity: %s: %w", ShapesFile, err)
	}
	return counts, nil
}
