package chaosbench

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcd-chaosbench/chaosbench/clusters"
)

// etcdSample is what fidelity reads from etcd at the start and the end of a load.
type etcdSample struct {
	at       time.Time
	families []map[string]*dto.MetricFamily
	// prefixes counts keys and value bytes per /registry/<resource> at the sample (end only).
	keys, bytes map[string]float64
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
