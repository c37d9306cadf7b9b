package live

import (
	"bytes"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// BenchmarkRecord is what the exporter adds to every request of the load: it must stay allocation-free
// and a small fraction of a request's microseconds.
func BenchmarkRecord(b *testing.B) {
	e := New("bench")
	r := &results.Record{Op: "create/pods", Intended: time.Millisecond, Start: time.Millisecond, End: 3 * time.Millisecond}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			e.Record(0, r)
		}
	})
}

// Records, faults and verdicts show in the gathered families with their labels; errors count by class,
// and a failed transaction comparison (an answer, not an error) does not count as an error.
func TestExporterCounts(t *testing.T) {
	e := New("r1")
	e.Record(0, &results.Record{Op: "create/pods", End: 2 * time.Millisecond})
	e.Record(0, &results.Record{Op: "create/pods", Outcome: results.Failed, End: time.Millisecond})
	e.Record(0, &results.Record{Op: "put", Outcome: results.Error, ErrClass: "timeout", End: time.Millisecond, Miss: results.Lag})
	e.Fault("kill", []string{"m2"}, true)
	got := gather(t, e)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"chaosbench_requests_total", map[string]string{"op": "create", "resource": "pods", "run": "r1"}, 2},
		{"chaosbench_requests_total", map[string]string{"op": "put", "resource": ""}, 1},
		{"chaosbench_request_errors_total", map[string]string{"op": "put", "class": "timeout"}, 1},
		{"chaosbench_late_starts_total", map[string]string{"op": "put", "cause": "lag"}, 1},
		{"chaosbench_fault_active", map[string]string{"kind": "kill", "target": "m2"}, 1},
	} {
		if v, ok := find(got, c.name, c.labels); !ok || v != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, v, ok, c.want)
		}
	}
	if _, ok := find(got, "chaosbench_request_errors_total", map[string]string{"op": "create"}); ok {
		t.Errorf("a failed comparison counted as an error")
	}
	e.Fault("kill", []string{"m2"}, false)
	if v, _ := find(gather(t, e), "chaosbench_fault_active", map[string]string{"target": "m2"}); v != 0 {
		t.Errorf("fault gauge after healing: %v", v)
	}
}

func gather(t *testing.T, e *Exporter) []*dto.MetricFamily {
	t.Helper()
	mfs, err := e.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// find returns the value of the first series of name whose labels include labels.
func find(mfs []*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for k, v := range labels {
				if have[k] != v {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				return m.GetCounter().GetValue(), true
			case m.Gauge != nil:
				return m.GetGauge().GetValue(), true
			}
		}
	}
	return 0, false
}

// The remote-write body decodes as the protocol's WriteRequest: snappy, then TimeSeries of sorted labels
// with one sample each, histograms as _bucket/_sum/_count series.
func TestWriteRequestEncoding(t *testing.T) {
	e := New("r1")
	e.Record(0, &results.Record{Op: "put", End: 2 * time.Millisecond})
	mfs, _ := e.Registry().Gather()
	at := time.UnixMilli(1_700_000_000_000)
	body := s2.EncodeSnappy(nil, encodeWriteRequest(mfs, at))
	raw, err := s2.Decode(nil, body)
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for len(raw) > 0 {
		num, typ, n := protowire.ConsumeTag(raw)
		if num != 1 || typ != protowire.BytesType {
			t.Fatalf("WriteRequest field %d type %d", num, typ)
		}
		raw = raw[n:]
		ts, n := protowire.ConsumeBytes(raw)
		raw = raw[n:]
		var labels []string
		samples := 0
		for len(ts) > 0 {
			num, _, n := protowire.ConsumeTag(ts)
			ts = ts[n:]
			v, n := protowire.ConsumeBytes(ts)
			ts = ts[n:]
			switch num {
			case 1:
				_, _, k := protowire.ConsumeTag(v)
				name, m := protowire.ConsumeString(v[k:])
				_, _, k2 := protowire.ConsumeTag(v[k+m:])
				value, _ := protowire.ConsumeString(v[k+m+k2:])
				labels = append(labels, name)
				if name == "__name__" {
					names[value] = true
				}
			case 2:
				samples++
				_, _, k := protowire.ConsumeTag(v)
				_, m := protowire.ConsumeFixed64(v[k:])
				_, _, k2 := protowire.ConsumeTag(v[k+m:])
				stamp, _ := protowire.ConsumeVarint(v[k+m+k2:])
				if int64(stamp) != at.UnixMilli() {
					t.Fatalf("timestamp %d", stamp)
				}
			}
		}
		if samples != 1 || !sortedStrings(labels) {
			t.Fatalf("series with labels %v and %d samples", labels, samples)
		}
	}
	for _, n := range []string{"chaosbench_requests_total", "chaosbench_response_seconds_bucket", "chaosbench_response_seconds_sum", "chaosbench_response_seconds_count"} {
		if !names[n] {
			t.Errorf("no %s series", n)
		}
	}
	if bytes.Contains(body, []byte("Bearer")) {
		t.Error("credentials in the body")
	}
}

func sortedStrings(xs []string) bool {
	for i := 1; i < len(xs); i++ {
		if xs[i-1] > xs[i] {
			return false
		}
	}
	return true
}
