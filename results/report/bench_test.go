package report

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	hdr "github.com/HdrHistogram/hdrhistogram-go"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// BenchmarkLoadHourLongLatencyLog reads the interval log of an hour-long run of four operations (3600
// one-second intervals each, response and service: 28800 histograms) the way a report does, and reports the
// heap it keeps: it must not grow with the run's length (an interval histogram takes about 150 KB, so
// keeping them all would take about 4 GB).
func BenchmarkLoadHourLongLatencyLog(b *testing.B) {
	dir := b.TempDir()
	f, err := os.Create(filepath.Join(dir, results.LatencyLogFile))
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	lw := hdr.NewHistogramLogWriter(w)
	lw.OutputLogFormatVersion()
	lw.OutputLegend()
	// Each operation's interval is encoded once and written 3600 times with its own timestamps: the reader
	// decodes every line all the same.
	payload := map[string]string{}
	h := results.NewHistogram()
	for _, op := range []string{"put", "range", "txn-put", "txn-range"} {
		for _, tag := range []string{".response", ".service"} {
			h.Reset()
			for v := range 200 {
				h.RecordValue(int64(1e6 + v*1e4))
			}
			snap, err := h.Encode(hdr.V2CompressedEncodingCookieBase)
			if err != nil {
				b.Fatal(err)
			}
			payload[op+tag] = string(snap)
		}
	}
	for i := range 3600 {
		for _, op := range []string{"put", "range", "txn-put", "txn-range"} {
			for _, tag := range []string{".response", ".service"} {
				fmt.Fprintf(w, "Tag=%s%s,%d.000,1.000,22.990,%s\n", op, tag, i, payload[op+tag])
			}
		}
	}
	w.Flush()
	f.Close()
	st, _ := os.Stat(f.Name())
	b.SetBytes(st.Size())
	b.ReportAllocs()
	var kept uint64
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		l, err := readLatencies(dir)
		if err != nil || len(l) != 4 || len(l["put"].Batches) != maxBatches {
			b.Fatalf("%v %d", err, len(l))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		kept = after.HeapAlloc - before.HeapAlloc
		runtime.KeepAlive(l)
	}
	b.ReportMetric(float64(kept)/(1<<20), "MiB-kept")
}
