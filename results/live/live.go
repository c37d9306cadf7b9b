// Package live shows a run as it happens: progress on the terminal (bars, or plain lines where output is not
// a terminal), and, where operators already look, Prometheus metrics served on
// /metrics (--metrics-addr) and pushed by remote write (--prometheus-remote-write) for CI runners nothing
// scrapes. It is a results.Sink: every record becomes counters and latency histograms per operation and
// resource; the fault runner sets a gauge per fault kind and target while a fault is in effect, so that
// Grafana can shade it; and the run's check verdicts and outcome are set at the end.
//
// The request path pays a map lookup, two counter increments and two histogram observations per record,
// all lock-free in client_golang: the exporter must not distort what it watches (BenchmarkRecord).
package live

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// Buckets are the classic histogram buckets of response and service times, in seconds: 100 µs to 60 s,
// about four per decade, so that a p99 read from them is within a bucket (a factor of 1.8 at most) of the
// run's exact HDR figure. Native histograms (a factor of 1.1) are exported beside them where the scraper
// negotiates them.
var Buckets = []float64{0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// Exporter holds a run's live metrics.
type Exporter struct {
	reg *prometheus.Registry

	requests, errors, late *prometheus.CounterVec
	response, service      *prometheus.HistogramVec
	fault                  *prometheus.GaugeVec
	check                  *prometheus.GaugeVec
	outcome                *prometheus.GaugeVec

	ops sync.Map // op name -> *opMetrics

	srv *http.Server
	ln  net.Listener
}

// opMetrics are one operation's children, looked up once and kept.
type opMetrics struct {
	requests          prometheus.Counter
	response, service prometheus.Observer
	op, resource      string
	errs              *prometheus.CounterVec
	errByClass        sync.Map // class -> prometheus.Counter
	backlog, lag      prometheus.Counter
}

// New creates the exporter of run (a label on every series, so that one Prometheus keeps many runs apart).
func New(run string) *Exporter {
	reg := prometheus.NewRegistry()
	wrapped := prometheus.WrapRegistererWith(prometheus.Labels{"run": run}, reg)
	e := &Exporter{reg: reg}
	opLabels := []string{"op", "resource"}
	e.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chaosbench_requests_total",
		Help: "Requests completed (and watch events received), by operation and resource."}, opLabels)
	e.errors = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chaosbench_request_errors_total",
		Help: "Requests that failed, by operation, resource and error class."}, append(opLabels, "class"))
	e.late = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "chaosbench_late_starts_total",
		Help: "Requests that started later than their schedule allowed: backlog (every client busy) or lag (the generator itself)."},
		append(opLabels, "cause"))
	hist := func(name, help string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: Buckets,
			NativeHistogramBucketFactor: 1.1, NativeHistogramMaxBucketNumber: 160, NativeHistogramMinResetDuration: time.Hour},
			opLabels)
	}
	e.response = hist("chaosbench_response_seconds", "Response time: from the request's intended start (open loop) to its end.")
	e.service = hist("chaosbench_service_seconds", "Service time: from the request's actual send to its end.")
	e.fault = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "chaosbench_fault_active",
		Help: "1 while a fault of this kind is in effect on this target, 0 otherwise."}, []string{"kind", "target"})
	e.check = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "chaosbench_check_verdict",
		Help: "1 for each consistency check's verdict once the checks ran (ok, violation, unknown, nothing to check)."},
		[]string{"check", "verdict"})
	e.outcome = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "chaosbench_outcome",
		Help: "1 for the run's outcome once it is decided (ok, threshold-failed, undecided, harness-error, incomplete, violation)."},
		[]string{"outcome"})
	wrapped.MustRegister(e.requests, e.errors, e.late, e.response, e.service, e.fault, e.check, e.outcome,
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{Namespace: "chaosbench"}))
	return e
}

// Registry is the exporter's registry (tests and the remote writer gather from it).
func (e *Exporter) Registry() *prometheus.Registry { return e.reg }

// opOf returns an operation's children, created on its first record.
func (e *Exporter) opOf(name string) *opMetrics {
	if m, ok := e.ops.Load(name); ok {
		return m.(*opMetrics)
	}
	op, resource, _ := strings.Cut(name, "/")
	m := &opMetrics{op: op, resource: resource,
		requests: e.requests.WithLabelValues(op, resource),
		response: e.response.WithLabelValues(op, resource), service: e.service.WithLabelValues(op, resource),
		errs:    e.errors,
		backlog: e.late.WithLabelValues(op, resource, "backlog"),
		lag:     e.late.WithLabelValues(op, resource, "lag"),
	}
	got, _ := e.ops.LoadOrStore(name, m)
	return got.(*opMetrics)
}

// Record counts r: safe for concurrent use, as a results.Sink must be.
func (e *Exporter) Record(_ int, r *results.Record) {
	m := e.opOf(r.Op)
	m.requests.Inc()
	m.response.Observe(r.ResponseTime().Seconds())
	m.service.Observe(r.ServiceTime().Seconds())
	if r.Outcome == results.Error {
		class := r.ErrClass
		if class == "" {
			class = "unknown"
		}
		c, ok := m.errByClass.Load(class)
		if !ok {
			c, _ = m.errByClass.LoadOrStore(class, m.errs.WithLabelValues(m.op, m.resource, class))
		}
		c.(prometheus.Counter).Inc()
	}
	switch r.Miss {
	case results.Backlog:
		m.backlog.Inc()
	case results.Lag:
		m.lag.Inc()
	}
}

// Fault sets the gauge of a fault kind on its targets: 1 while injected, 0 once healed.
func (e *Exporter) Fault(kind string, targets []string, active bool) {
	if len(targets) == 0 {
		targets = []string{"cluster"}
	}
	v := 0.0
	if active {
		v = 1
	}
	for _, t := range targets {
		e.fault.WithLabelValues(kind, t).Set(v)
	}
}

// Verdicts sets the checks' verdicts and the run's outcome, at the end of the run.
func (e *Exporter) Verdicts(checks []results.Check, outcome string) {
	for _, c := range checks {
		e.check.WithLabelValues(c.Name, c.Verdict).Set(1)
	}
	if outcome != "" {
		e.outcome.WithLabelValues(outcome).Set(1)
	}
}

// Serve serves /metrics on addr (host:port; port 0 picks one) until Close; it returns once listening.
func (e *Exporter) Serve(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--metrics-addr %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(e.reg, promhttp.HandlerOpts{EnableOpenMetrics: true}))
	e.ln, e.srv = ln, &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go e.srv.Serve(ln)
	return nil
}

// Addr is the address /metrics is served on ("" when not serving).
func (e *Exporter) Addr() string {
	if e.ln == nil {
		return ""
	}
	return e.ln.Addr().String()
}

// Close stops serving.
func (e *Exporter) Close(ctx context.Context) error {
	if e.srv == nil {
		return nil
	}
	err := e.srv.Shutdown(ctx)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
