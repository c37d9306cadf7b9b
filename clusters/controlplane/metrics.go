package controlplane

import (
	"context"
	"fmt"
	"io"
	"math"
	"sort"
	"text/tabwriter"
	"time"

	dto "github.com/prometheus/client_model/go"
)

// Snapshot is the control plane's state at one moment: every apiserver's metrics and every process's usage.
type Snapshot struct {
	At      time.Time
	Metrics []map[string]*dto.MetricFamily // per apiserver; nil where the scrape failed
	// Texts are the apiservers' metrics as they served them, and ScrapedAt when each scrape returned
	// (nil and zero where it failed): saved, they are the same window as Metrics.
	Texts     [][]byte
	ScrapedAt []time.Time
	Usage     map[string]Usage
	Failures  []string
}

// Snapshot scrapes every apiserver and reads every process's usage.
func (c *ControlPlane) Snapshot(ctx context.Context) Snapshot {
	s := Snapshot{At: time.Now(), Usage: c.Usage()}
	for i := range c.urls {
		body, err := c.ScrapeText(ctx, i)
		var fams map[string]*dto.MetricFamily
		var at time.Time
		if err == nil {
			at = time.Now()
			fams, err = parseText(i, body)
		}
		if err != nil {
			s.Failures = append(s.Failures, err.Error())
			body = nil
		}
		s.Metrics, s.Texts, s.ScrapedAt = append(s.Metrics, fams), append(s.Texts, body), append(s.ScrapedAt, at)
	}
	return s
}

// Latency summarises one histogram series over a window: how many, the mean and interpolated percentiles.
type Latency struct {
	// Verb and Resource name the series: verb/resource for apiserver requests, operation/resource for
	// the apiservers' etcd requests.
	Verb     string  `json:"verb"`
	Resource string  `json:"resource"`
	Count    float64 `json:"count"`
	PerSec   float64 `json:"per_second"`
	MeanMs   float64 `json:"mean_ms"`
	P50Ms    float64 `json:"p50_ms"`
	P99Ms    float64 `json:"p99_ms"`
}

// ProcessUsage is one component's resource use over a window.
type ProcessUsage struct {
	Name         string  `json:"name"`
	CPUSeconds   float64 `json:"cpu_seconds"`
	Cores        float64 `json:"cores"`
	RSSBytes     int64   `json:"rss_bytes"`
	PeakRSSBytes int64   `json:"peak_rss_bytes"`
}

// Report is what the control plane did between two snapshots.
type Report struct {
	Seconds float64 `json:"seconds"`
	// Requests is apiserver_request_duration_seconds by verb and resource (all apiservers together).
	Requests []Latency `json:"apiserver_requests"`
	// Etcd is etcd_request_duration_seconds by operation and resource: the apiservers' view of etcd.
	Etcd      []Latency      `json:"etcd_requests"`
	Processes []ProcessUsage `json:"processes"`
	Failures  []string       `json:"scrape_failures,omitempty"`
}

type hist struct {
	bounds []float64
	cum    []float64
	count  float64
	sum    float64
}

// histograms sums the histogram family name over apiservers by key(labels).
func histograms(snap Snapshot, name string, key func(map[string]string) [2]string) map[[2]string]*hist {
	out := map[[2]string]*hist{}
	for _, fams := range snap.Metrics {
		f := fams[name]
		if f == nil {
			continue
		}
		for _, m := range f.GetMetric() {
			h := m.GetHistogram()
			if h == nil {
				continue
			}
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			k := key(labels)
			agg := out[k]
			if agg == nil {
				agg = &hist{}
				for _, b := range h.GetBucket() {
					agg.bounds = append(agg.bounds, b.GetUpperBound())
				}
				agg.cum = make([]float64, len(agg.bounds))
				out[k] = agg
			}
			if len(h.GetBucket()) != len(agg.bounds) {
				continue
			}
			for i, b := range h.GetBucket() {
				agg.cum[i] += float64(b.GetCumulativeCount())
			}
			agg.count += float64(h.GetSampleCount())
			agg.sum += h.GetSampleSum()
		}
	}
	return out
}

// quantile interpolates the q-quantile (seconds) within cumulative buckets.
func (h *hist) quantile(q float64) float64 {
	if h.count <= 0 {
		return 0
	}
	rank := q * h.count
	prevBound, prevCum := 0.0, 0.0
	for i, b := range h.bounds {
		if h.cum[i] >= rank {
			if math.IsInf(b, 1) || h.cum[i] == prevCum {
				return prevBound
			}
			return prevBound + (b-prevBound)*(rank-prevCum)/(h.cum[i]-prevCum)
		}
		prevBound, prevCum = b, h.cum[i]
	}
	return prevBound
}

// window returns after - before per key.
func window(before, after map[[2]string]*hist, seconds float64) []Latency {
	var out []Latency
	for k, a := range after {
		d := &hist{bounds: a.bounds, cum: append([]float64(nil), a.cum...), count: a.count, sum: a.sum}
		if b := before[k]; b != nil && len(b.cum) == len(d.cum) {
			for i := range d.cum {
				d.cum[i] -= b.cum[i]
			}
			d.count -= b.count
			d.sum -= b.sum
		}
		if d.count <= 0 {
			continue
		}
		l := Latency{Verb: k[0], Resource: k[1], Count: d.count, MeanMs: 1000 * d.sum / d.count,
			P50Ms: 1000 * d.quantile(0.5), P99Ms: 1000 * d.quantile(0.99)}
		if seconds > 0 {
			l.PerSec = d.count / seconds
		}
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Count != out[j].Count {
			return out[i].Count > out[j].Count
		}
		return out[i].Verb+out[i].Resource < out[j].Verb+out[j].Resource
	})
	return out
}

// requestKey names an apiserver request series: verb and resource (with its subresource).
func requestKey(l map[string]string) [2]string {
	res := l["resource"]
	if l["subresource"] != "" {
		res += "/" + l["subresource"]
	}
	return [2]string{l["verb"], res}
}

// etcdKey names an apiserver's etcd request series: operation and resource (older releases label it
// type).
func etcdKey(l map[string]string) [2]string {
	res := l["resource"]
	if res == "" {
		res = l["type"]
	}
	return [2]string{l["operation"], res}
}

// Compare reports what happened between two snapshots.
func Compare(before, after Snapshot) Report {
	secs := after.At.Sub(before.At).Seconds()
	r := Report{Seconds: secs, Failures: append(append([]string(nil), before.Failures...), after.Failures...)}
	r.Requests = window(histograms(before, "apiserver_request_duration_seconds", requestKey),
		histograms(after, "apiserver_request_duration_seconds", requestKey), secs)
	r.Etcd = window(histograms(before, "etcd_request_duration_seconds", etcdKey),
		histograms(after, "etcd_request_duration_seconds", etcdKey), secs)
	var names []string
	for n := range after.Usage {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		a := after.Usage[n]
		p := ProcessUsage{Name: n, CPUSeconds: a.CPUSeconds - before.Usage[n].CPUSeconds, RSSBytes: a.RSSBytes, PeakRSSBytes: a.PeakRSSBytes}
		if secs > 0 {
			p.Cores = p.CPUSeconds / secs
		}
		r.Processes = append(r.Processes, p)
	}
	return r
}

// WriteText prints the report's tables: the busiest request series (top 15 of each) and the processes.
func (r Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	table := func(title, verb string, rows []Latency) {
		fmt.Fprintf(tw, "%s\t\t\t\t\t\t\n", title)
		fmt.Fprintf(tw, "%s\tresource\tcount\t/s\tmean ms\tp50 ms\tp99 ms\t\n", verb)
		for i, l := range rows {
			if i == 15 {
				fmt.Fprintf(tw, "(%d more)\t\t\t\t\t\t\t\n", len(rows)-15)
				break
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f\t%.2f\t%.1f\t%.1f\t%.1f\t\n", l.Verb, l.Resource, l.Count, l.PerSec, l.MeanMs, l.P50Ms, l.P99Ms)
		}
	}
	table("kube-apiserver requests (apiserver_request_duration_seconds)", "verb", r.Requests)
	table("kube-apiserver -> etcd (etcd_request_duration_seconds)", "operation", r.Etcd)
	fmt.Fprintf(tw, "process\tCPU s\tcores\tRSS MiB\tpeak MiB\t\n")
	for _, p := range r.Processes {
		fmt.Fprintf(tw, "%s\t%.1f\t%.2f\t%d\t%d\t\n", p.Name, p.CPUSeconds, p.Cores, p.RSSBytes>>20, p.PeakRSSBytes>>20)
	}
	return tw.Flush()
}
