package profile

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// Sample is one series of one scrape: histograms and summaries are flattened into their _count and _sum
// series (a profile reads counts and sizes, never buckets), as the Prometheus HTTP API returns them.
type Sample struct {
	Name   string
	Labels map[string]string
	Value  float64
}

// Scrape is one process's metrics at one moment.
type Scrape struct {
	// Source names where the scrape came from (a file, a Prometheus instance) in messages.
	Source string
	At     time.Time
	// AtKnown says At came from the scrape itself (a chaosbench header, a Prometheus query time) rather
	// than a file's modification time.
	AtKnown bool
	Samples []Sample
}

// ScrapeHeader starts the metrics files chaosbench saves: a comment Prometheus' text format ignores, with
// the time of the scrape, so that a profile does not depend on the files' modification times.
const ScrapeHeader = "# chaosbench scrape at "

// ParseScrape reads a scrape in Prometheus' text format. A file that is not Prometheus text, or holds no
// series, is a usage error.
func ParseScrape(source string, data []byte, at time.Time) (Scrape, error) {
	s := Scrape{Source: source, At: at}
	if first, _, _ := bytes.Cut(data, []byte("\n")); bytes.HasPrefix(first, []byte(ScrapeHeader)) {
		if t, err := time.Parse(time.RFC3339Nano, strings.TrimSpace(string(first[len(ScrapeHeader):]))); err == nil {
			s.At, s.AtKnown = t, true
		}
	}
	var p expfmt.TextParser
	fams, err := p.TextToMetricFamilies(bytes.NewReader(data))
	if err != nil {
		return s, outcome.Usagef("%s: not Prometheus text metrics: %v", source, err)
	}
	if len(fams) == 0 {
		return s, outcome.Usagef("%s: not Prometheus text metrics: no series", source)
	}
	s.Samples = flatten(fams)
	return s, nil
}

// ReadScrape reads a metrics file, timed by its header or else by its modification time.
func ReadScrape(path string) (Scrape, error) {
	f, err := os.Open(path)
	if err != nil {
		return Scrape{}, outcome.Usagef("%v", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Scrape{}, outcome.Usagef("%v", err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		return Scrape{}, outcome.Usagef("%s: %v", path, err)
	}
	return ParseScrape(path, data, st.ModTime())
}

func flatten(fams map[string]*dto.MetricFamily) []Sample {
	var out []Sample
	names := make([]string, 0, len(fams))
	for n := range fams {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		for _, m := range fams[name].GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			switch {
			case m.GetCounter() != nil:
				out = append(out, Sample{name, labels, m.GetCounter().GetValue()})
			case m.GetGauge() != nil:
				out = append(out, Sample{name, labels, m.GetGauge().GetValue()})
			case m.GetUntyped() != nil:
				out = append(out, Sample{name, labels, m.GetUntyped().GetValue()})
			case m.GetHistogram() != nil:
				h := m.GetHistogram()
				out = append(out, Sample{name + "_count", labels, float64(h.GetSampleCount())}, Sample{name + "_sum", labels, h.GetSampleSum()})
			case m.GetSummary() != nil:
				sm := m.GetSummary()
				out = append(out, Sample{name + "_count", labels, float64(sm.GetSampleCount())}, Sample{name + "_sum", labels, sm.GetSampleSum()})
			}
		}
	}
	return out
}

// has reports whether the scrape holds a series of any of the names.
func (s Scrape) has(names ...string) bool {
	for _, smp := range s.Samples {
		for _, n := range names {
			if smp.Name == n {
				return true
			}
		}
	}
	return false
}

// sum adds up the series of a name per key(labels).
func (s Scrape) sum(name string, key func(map[string]string) string) map[string]float64 {
	out := map[string]float64{}
	for _, smp := range s.Samples {
		if smp.Name == name {
			out[key(smp.Labels)] += smp.Value
		}
	}
	return out
}

// value returns the sum of a name's series whose labels match, and whether there was one.
func (s Scrape) value(name string, match map[string]string) (float64, bool) {
	var v float64
	found := false
next:
	for _, smp := range s.Samples {
		if smp.Name != name {
			continue
		}
		for k, want := range match {
			if smp.Labels[k] != want {
				continue next
			}
		}
		v += smp.Value
		found = true
	}
	return v, found
}

// Series is one process's scrapes in time order.
type Series struct {
	// Process names the process in the profile's notes: kube-apiserver-0, etcd-1.
	Process string
	Scrapes []Scrape
}

// window is what one process's counters did over its scrapes.
type window struct {
	seconds float64
	// restarts says where counters went backwards (a restart): those intervals count from zero.
	restarts []string
}

// increase is the increase of a name's series per key over the scrapes, as Prometheus' increase(): a value
// lower than the one before is a counter reset, and counts from zero.
func (s Series) increase(name string, key func(map[string]string) string) map[string]float64 {
	out := map[string]float64{}
	for i := 1; i < len(s.Scrapes); i++ {
		before, after := s.Scrapes[i-1].sum(name, key), s.Scrapes[i].sum(name, key)
		for k, v := range after {
			d := v - before[k]
			if d < 0 || s.restarted(i) {
				d = v
			}
			out[k] += d
		}
	}
	return out
}

// restarted reports whether the process restarted between scrapes i-1 and i: its start time changed.
func (s Series) restarted(i int) bool {
	a, okA := s.Scrapes[i-1].value("process_start_time_seconds", nil)
	b, okB := s.Scrapes[i].value("process_start_time_seconds", nil)
	return okA && okB && math.Abs(a-b) > 0.5
}

// resets lists the intervals in which the process restarted or a counter went backwards.
func (s Series) resets(counters []string) []string {
	var out []string
	for i := 1; i < len(s.Scrapes); i++ {
		reset := s.restarted(i)
		for _, name := range counters {
			if reset {
				break
			}
			before := s.Scrapes[i-1].sum(name, labelKey)
			for k, v := range s.Scrapes[i].sum(name, labelKey) {
				if v < before[k] {
					reset = true
					break
				}
			}
		}
		if reset {
			out = append(out, fmt.Sprintf("%s restarted between scrape %d and %d (%s, %s): its counters are taken from zero after the restart, as Prometheus' increase() does",
				s.Process, i, i+1, s.Scrapes[i-1].Source, s.Scrapes[i].Source))
		}
	}
	return out
}

// labelKey identifies a series by all its labels.
func labelKey(l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		b.WriteString(k + "=" + l[k] + ",")
	}
	return b.String()
}

// last is the process's last scrape.
func (s Series) last() Scrape { return s.Scrapes[len(s.Scrapes)-1] }

// seconds is the time the scrapes span.
func (s Series) seconds() float64 { return s.last().At.Sub(s.Scrapes[0].At).Seconds() }
