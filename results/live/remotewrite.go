package live

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/s2"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/protobuf/encoding/protowire"
)

// RemoteWriteOptions configures pushing the exporter's series to a Prometheus remote-write endpoint.
type RemoteWriteOptions struct {
	URL string
	// Interval between pushes (default 5 s); a last push follows Stop.
	Interval time.Duration
	// BasicAuthUser with BasicAuthPasswordFile, or BearerTokenFile: the credentials, read from files so
	// that they never appear on a command line, in a scenario or in any output.
	BasicAuthUser         string
	BasicAuthPasswordFile string
	BearerTokenFile       string
	// Log receives one line per failed push (never the credentials).
	Log io.Writer
}

// RemoteWriter pushes an exporter's series periodically (Prometheus remote write 1.0: a snappy-compressed
// protobuf WriteRequest).
type RemoteWriter struct {
	e      *Exporter
	o      RemoteWriteOptions
	client *http.Client
	auth   func(*http.Request)

	cancel context.CancelFunc
	done   chan struct{}

	mu       sync.Mutex
	pushes   int
	failures int
	lastErr  error
}

// StartRemoteWrite checks the options (reading the credential files), then pushes every interval until
// Stop.
func (e *Exporter) StartRemoteWrite(o RemoteWriteOptions) (*RemoteWriter, error) {
	if !strings.HasPrefix(o.URL, "http://") && !strings.HasPrefix(o.URL, "https://") {
		return nil, fmt.Errorf("--prometheus-remote-write %q: an http:// or https:// URL", o.URL)
	}
	if o.Interval <= 0 {
		o.Interval = 5 * time.Second
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
	w := &RemoteWriter{e: e, o: o, client: &http.Client{Timeout: 10 * time.Second}, auth: func(*http.Request) {}, done: make(chan struct{})}
	switch {
	case o.BearerTokenFile != "" && o.BasicAuthUser != "":
		return nil, fmt.Errorf("remote write: a bearer token or basic auth, not both")
	case o.BearerTokenFile != "":
		tok, err := readSecret(o.BearerTokenFile)
		if err != nil {
			return nil, err
		}
		w.auth = func(r *http.Request) { r.Header.Set("Authorization", "Bearer "+tok) }
	case o.BasicAuthUser != "":
		pw, err := readSecret(o.BasicAuthPasswordFile)
		if err != nil {
			return nil, err
		}
		w.auth = func(r *http.Request) { r.SetBasicAuth(o.BasicAuthUser, pw) }
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	go w.loop(ctx)
	return w, nil
}

// readSecret reads a credential file; the error names the file, never its content.
func readSecret(path string) (string, error) {
	if path == "" {
		return "", fmt.Errorf("remote write: basic auth needs a password file")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("remote write credentials: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if s == "" {
		return "", fmt.Errorf("remote write credentials: %s is empty", path)
	}
	return s, nil
}

func (w *RemoteWriter) loop(ctx context.Context) {
	defer close(w.done)
	t := time.NewTicker(w.o.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.push(ctx)
		}
	}
}

// Stop ends the periodic pushes and pushes once more (the final counts and verdicts), and returns how
// many pushes failed and the last error.
func (w *RemoteWriter) Stop(ctx context.Context) (pushes, failures int, err error) {
	w.cancel()
	<-w.done
	w.push(ctx)
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pushes, w.failures, w.lastErr
}

func (w *RemoteWriter) push(ctx context.Context) {
	err := w.send(ctx)
	w.mu.Lock()
	w.pushes++
	if err != nil {
		w.failures++
		w.lastErr = err
	}
	w.mu.Unlock()
	if err != nil {
		fmt.Fprintf(w.o.Log, "prometheus remote write: %v\n", err)
	}
}

func (w *RemoteWriter) send(ctx context.Context) error {
	mfs, err := w.e.reg.Gather()
	if err != nil {
		return err
	}
	body := s2.EncodeSnappy(nil, encodeWriteRequest(mfs, time.Now()))
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.o.URL, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	req.Header.Set("Content-Encoding", "snappy")
	req.Header.Set("X-Prometheus-Remote-Write-Version", "0.1.0")
	req.Header.Set("User-Agent", "chaosbench")
	w.auth(req)
	resp, err := w.client.Do(req)
	if err != nil {
		// The URL may carry credentials of its own: name the host only.
		return fmt.Errorf("push to %s: %w", req.URL.Host, unwrapURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 256))
		return fmt.Errorf("push to %s: %s: %s", req.URL.Host, resp.Status, strings.TrimSpace(string(msg)))
	}
	return nil
}

// unwrapURLError drops the URL that net/http puts in its errors.
func unwrapURLError(err error) error {
	type unwrapper interface{ Unwrap() error }
	if u, ok := err.(unwrapper); ok && strings.Contains(err.Error(), "://") {
		return u.Unwrap()
	}
	return err
}

// A sample series of the remote-write protocol.
type series struct {
	labels [][2]string
	value  float64
}

// encodeWriteRequest encodes the gathered families as a remote-write WriteRequest at time at: counters and
// gauges as one series each, classic histograms as their _bucket (with le), _sum and _count series, the
// way Prometheus itself stores a scraped histogram.
//
// The WriteRequest protobuf is small and stable (prometheus/prompb: WriteRequest{1: repeated TimeSeries},
// TimeSeries{1: repeated Label, 2: repeated Sample}, Label{1: name, 2: value}, Sample{1: double value,
// 2: int64 timestamp ms}); it is written with protowire rather than by importing the Prometheus server
// module for its generated types.
func encodeWriteRequest(mfs []*dto.MetricFamily, at time.Time) []byte {
	ts := at.UnixMilli()
	var all []series
	for _, mf := range mfs {
		name := mf.GetName()
		for _, m := range mf.GetMetric() {
			base := [][2]string{}
			for _, l := range m.GetLabel() {
				base = append(base, [2]string{l.GetName(), l.GetValue()})
			}
			with := func(metric string, extra ...[2]string) [][2]string {
				ls := append([][2]string{{"__name__", metric}}, base...)
				ls = append(ls, extra...)
				sort.Slice(ls, func(i, j int) bool { return ls[i][0] < ls[j][0] })
				return ls
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				all = append(all, series{with(name), m.GetCounter().GetValue()})
			case dto.MetricType_GAUGE:
				all = append(all, series{with(name), m.GetGauge().GetValue()})
			case dto.MetricType_UNTYPED:
				all = append(all, series{with(name), m.GetUntyped().GetValue()})
			case dto.MetricType_HISTOGRAM:
				h := m.GetHistogram()
				for _, b := range h.GetBucket() {
					all = append(all, series{with(name+"_bucket", [2]string{"le", formatLe(b.GetUpperBound())}), float64(b.GetCumulativeCount())})
				}
				all = append(all, series{with(name+"_bucket", [2]string{"le", "+Inf"}), float64(h.GetSampleCount())},
					series{with(name + "_sum"), h.GetSampleSum()}, series{with(name + "_count"), float64(h.GetSampleCount())})
			}
		}
	}
	var req []byte
	for _, s := range all {
		var t []byte
		for _, l := range s.labels {
			var lb []byte
			lb = protowire.AppendTag(lb, 1, protowire.BytesType)
			lb = protowire.AppendString(lb, l[0])
			lb = protowire.AppendTag(lb, 2, protowire.BytesType)
			lb = protowire.AppendString(lb, l[1])
			t = protowire.AppendTag(t, 1, protowire.BytesType)
			t = protowire.AppendBytes(t, lb)
		}
		var sb []byte
		sb = protowire.AppendTag(sb, 1, protowire.Fixed64Type)
		sb = protowire.AppendFixed64(sb, math.Float64bits(s.value))
		sb = protowire.AppendTag(sb, 2, protowire.VarintType)
		sb = protowire.AppendVarint(sb, uint64(ts))
		t = protowire.AppendTag(t, 2, protowire.BytesType)
		t = protowire.AppendBytes(t, sb)
		req = protowire.AppendTag(req, 1, protowire.BytesType)
		req = protowire.AppendBytes(req, t)
	}
	return req
}

// formatLe writes a bucket bound as Prometheus does in its le label.
func formatLe(v float64) string {
	if math.IsInf(v, 1) {
		return "+Inf"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
