package results

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// SummaryFile is the name of the run summary inside a run directory; SummarySchema versions its layout.
// The schema is documented in results/SCHEMA.md.
const (
	SummaryFile   = "summary.json"
	SummarySchema = "chaosbench.summary/v1"
)

// Summary is the machine-readable result of a run (summary.json). Field meanings and units are documented
// in results/SCHEMA.md; latencies are in milliseconds, throughputs in operations per second.
type Summary struct {
	Schema string `json:"schema"`
	Name   string `json:"name"`
	// Outcome and Reasons are the run's verdict (see Decide): the exit code, every report's headline and
	// JUnit are derived from them and nothing else.
	Outcome outcome.Kind     `json:"outcome"`
	Reasons []outcome.Reason `json:"reasons,omitempty"`
	// Interrupted says the run was stopped by a signal; Incomplete that its load did not run to the end
	// (interrupted, or stopped by an error).
	Interrupted      bool     `json:"interrupted,omitempty"`
	Command          []string `json:"command,omitempty"`
	Incomplete       bool     `json:"incomplete"`
	IncompleteReason string   `json:"incomplete_reason,omitempty"`
	// EndedEarly says why the load ended before its duration on purpose, complete (qualify's early
	// stop of a decided step): its figures cover MeasuredSeconds.
	EndedEarly      string                `json:"ended_early,omitempty"`
	Seed            int64                 `json:"seed"`
	Versions        Versions              `json:"versions"`
	Cluster         ClusterInfo           `json:"cluster"`
	Config          json.RawMessage       `json:"config,omitempty"`
	Start           time.Time             `json:"start"`
	End             time.Time             `json:"end"`
	DurationSeconds float64               `json:"duration_s"`
	WarmupSeconds   float64               `json:"warmup_s"`
	MeasuredSeconds float64               `json:"measured_s"`
	Schedule        Schedule              `json:"schedule"`
	Total           Total                 `json:"total"`
	Operations      map[string]*Operation `json:"operations"`
	Faults          []FaultWindow         `json:"faults,omitempty"`
	Phases          map[string]*Phase     `json:"phases,omitempty"`
	Checks          []Check               `json:"checks,omitempty"`
	// CheckAfterLoadSeconds is how long the run kept its user waiting for the verdict after the load: from
	// the load's end, through the teardown and the checks of the history, to the outcome. CheckSeconds is
	// the checks' share of it, and CheckDuringLoad says what the checks while the load ran (which make the
	// checks after it shorter) did. Zero and nil when the run did not check its history.
	CheckAfterLoadSeconds float64          `json:"check_after_load_seconds,omitempty"`
	CheckSeconds          float64          `json:"check_seconds,omitempty"`
	CheckDuringLoad       *CheckDuringLoad `json:"check_during_load,omitempty"`
	// CheckReadDuringLoad says the checks took the history read while the load wrote it
	// (--read-during-load), rather than reading it after the load.
	CheckReadDuringLoad bool           `json:"check_read_during_load,omitempty"`
	Kube                *Kube          `json:"kube,omitempty"`
	GeneratorLoad       *GeneratorLoad `json:"generator_load,omitempty"`
	// Split is set on a run whose load was split over several generators: on each worker's run, its
	// share and clock; on the merged run, every worker's.
	Split *Split `json:"split,omitempty"`
	// Errors are what did not go as asked (harness errors): each is a reason of a failed outcome.
	Errors []string `json:"errors,omitempty"`
	// NotRecovered names the fault windows after which the cluster was not healthy again in time: each fails
	// the run as a threshold does (the cluster did not meet the availability the run expects).
	NotRecovered []string `json:"not_recovered,omitempty"`
	// Crashes are the member processes that exited or panicked when no fault asked them to: each makes the
	// outcome member-crashed (exit 4).
	Crashes []Crash `json:"crashes,omitempty"`
	// KnownIssues are the findings attributed, from the evidence the run recorded, to a known upstream issue
	// of the catalog; KnownIssuePolicy ("report" or "fail", --known-issues) says whether they fail the run.
	KnownIssues      []KnownIssueFinding `json:"known_issues,omitempty"`
	KnownIssuePolicy string              `json:"known_issue_policy,omitempty"`
	// Allowed are problems the scenario explicitly allowed (--fault-skip-ok): shown, but not failing.
	Allowed []string `json:"allowed,omitempty"`

	// Reports (issue 7): the run's time base (offsets in every file count from it), etcd's own metrics,
	// threshold verdicts, the diagnosis and the machine.
	TimeBase    time.Time         `json:"time_base,omitzero"`
	Server      *ServerMetrics    `json:"server_metrics,omitempty"`
	Thresholds  []ThresholdResult `json:"thresholds,omitempty"`
	Diagnosis   []Finding         `json:"diagnosis,omitempty"`
	Environment *Environment      `json:"environment,omitempty"`
}

// Versions records what ran: chaosbench itself, the etcd client library, the etcd server as reported by
// the cluster, and Go.
type Versions struct {
	Chaosbench string `json:"chaosbench"`
	EtcdClient string `json:"etcd_client"`
	EtcdServer string `json:"etcd_server,omitempty"`
	Go         string `json:"go"`
}

// ClusterInfo describes the cluster a run used.
type ClusterInfo struct {
	Backend   string   `json:"backend"`
	Members   int      `json:"members"`
	Endpoints []string `json:"endpoints"`
	EtcdFlags []string `json:"etcd_flags,omitempty"`
	// EtcdVersions is each member's etcd build when chaosbench started them from built releases (or a mix):
	// "v3.5.35", "builtin (v3.6.16)".
	EtcdVersions []string `json:"etcd_versions,omitempty"`
	// MemberCPUs and MemberMemoryBytes are the docker backend's per-member limits (0: none).
	MemberCPUs        float64 `json:"member_cpus,omitempty"`
	MemberMemoryBytes int64   `json:"member_memory_bytes,omitempty"`
}

// Schedule describes the load schedule: its target rate (0 for closed loop) and how many operations
// started late, by cause (see Miss).
type Schedule struct {
	Mode          string  `json:"mode"`
	TargetRate    float64 `json:"target_rate,omitempty"`
	Clients       int     `json:"clients"`
	Conns         int     `json:"conns"`
	MissedBacklog int64   `json:"missed_backlog"`
	MissedLag     int64   `json:"missed_lag"`
	MissedPercent float64 `json:"missed_percent"`
}

// Total aggregates all operations.
type Total struct {
	Count      int64   `json:"count"`
	Errors     int64   `json:"errors"`
	Failed     int64   `json:"failed"`
	Throughput float64 `json:"throughput"`
}

// Operation summarises one operation (or one operation on one resource, such as "create/pods").
type Operation struct {
	Count               int64            `json:"count"`
	Errors              int64            `json:"errors"`
	Failed              int64            `json:"failed"`
	Throughput          float64          `json:"throughput"`
	ThroughputPerSecond Spread           `json:"throughput_per_interval"`
	ErrorsByClass       map[string]int64 `json:"errors_by_class,omitempty"`
	MissedBacklog       int64            `json:"missed_backlog"`
	MissedLag           int64            `json:"missed_lag"`
	Service             Latency          `json:"service_ms"`
	Response            Latency          `json:"response_ms"`
}

// Spread summarises a series of per-interval values.
type Spread struct {
	Min    float64 `json:"min"`
	Mean   float64 `json:"mean"`
	Max    float64 `json:"max"`
	StdDev float64 `json:"stddev"`
}

// Latency holds percentiles of a latency histogram, in milliseconds.
type Latency struct {
	Min  float64 `json:"min"`
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	P999 float64 `json:"p99_9"`
	Max  float64 `json:"max"`
}

// LatencyOf returns the percentiles of h.
func LatencyOf(h *hdr.Histogram) Latency {
	if h.TotalCount() == 0 {
		return Latency{}
	}
	return Latency{
		Min:  ms(h.Min()),
		Mean: h.Mean() / 1e6,
		P50:  ms(h.ValueAtQuantile(50)),
		P90:  ms(h.ValueAtQuantile(90)),
		P99:  ms(h.ValueAtQuantile(99)),
		P999: ms(h.ValueAtQuantile(99.9)),
		Max:  ms(h.Max()),
	}
}

// Operations summarises every operation recorded, with throughput over the measured window.
// Call it after Close.
func (c *Collector) Operations(measured time.Duration) map[string]*Operation {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]*Operation{}
	c.ops.Range(func(k, v any) bool {
		st := v.(*opState)
		w := st.total
		if w.count == 0 {
			return true
		}
		op := &Operation{
			Count: w.count, Errors: w.errors, Failed: w.failed,
			MissedBacklog: w.backlog, MissedLag: w.lag,
			Service:  LatencyOf(w.service),
			Response: LatencyOf(w.response),
			ThroughputPerSecond: Spread{
				Min: st.tput.min, Mean: st.tput.mean, Max: st.tput.max, StdDev: st.tput.stddev(),
			},
		}
		if measured > 0 {
			op.Throughput = float64(w.count) / measured.Seconds()
		}
		if len(w.errClasses) > 0 {
			op.ErrorsByClass = map[string]int64{}
			for class, n := range w.errClasses {
				op.ErrorsByClass[class] = n
			}
		}
		out[k.(string)] = op
		return true
	})
	return out
}

// Totals adds up the operations of a summary.
func Totals(ops map[string]*Operation) Total {
	var t Total
	for _, op := range ops {
		t.Count += op.Count
		t.Errors += op.Errors
		t.Failed += op.Failed
		t.Throughput += op.Throughput
	}
	return t
}

// HGRMDir is the sub-folder of a run directory that holds the .hgrm files: two per operation, which would
// otherwise bury summary.json, the reports and the logs.
const HGRMDir = "hgrm"

// WriteHGRM writes one percentile distribution per operation into the run directory dir's HGRMDir, in the
// HdrHistogram .hgrm text format with values in milliseconds: <op>.hgrm for response time and
// <op>.service.hgrm for service time. "/" in operation names becomes "_".
func (c *Collector) WriteHGRM(dir string) error {
	dir = filepath.Join(dir, HGRMDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("write percentile distributions: %w", err)
	}
	var names []string
	c.ops.Range(func(k, _ any) bool {
		names = append(names, k.(string))
		return true
	})
	for _, name := range names {
		service, response := c.Histograms(name)
		if err := WriteOperationHGRM(dir, name, response, service); err != nil {
			return err
		}
	}
	return nil
}

// WriteOperationHGRM writes one operation's response and service time distributions into hgrmDir (a run
// directory's HGRMDir); an operation without records writes nothing.
func WriteOperationHGRM(hgrmDir, name string, response, service *hdr.Histogram) error {
	if response == nil || response.TotalCount() == 0 {
		return nil
	}
	if err := os.MkdirAll(hgrmDir, 0o755); err != nil {
		return fmt.Errorf("write percentile distributions: %w", err)
	}
	base := strings.ReplaceAll(name, "/", "_")
	for file, h := range map[string]*hdr.Histogram{base + ".hgrm": response, base + ".service.hgrm": service} {
		if err := writeHGRM(filepath.Join(hgrmDir, file), h); err != nil {
			return err
		}
	}
	return nil
}

func writeHGRM(path string, h *hdr.Histogram) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	if _, err := h.PercentilesPrint(f, 5, 1e6); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return f.Close()
}

// WriteSummary writes s as indented JSON to dir/summary.json.
func WriteSummary(dir string, s *Summary) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode summary: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, SummaryFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write summary: %w", err)
	}
	return nil
}

// ReadSummary reads dir/summary.json.
func ReadSummary(dir string) (*Summary, error) {
	b, err := os.ReadFile(filepath.Join(dir, SummaryFile))
	if err != nil {
		return nil, fmt.Errorf("read summary: %w", err)
	}
	var s Summary
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("read summary: %s: %w", filepath.Join(dir, SummaryFile), err)
	}
	return &s, nil
}

// WriteText prints the human summary of a run: one line per operation with count, throughput, response
// time percentiles and errors; in open-loop runs, service times and schedule misses too.
func WriteText(w io.Writer, s *Summary) error {
	names := make([]string, 0, len(s.Operations))
	for name := range s.Operations {
		names = append(names, name)
	}
	sort.Strings(names)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	heading := "operation\tcount\tops/s\tp50\tp90\tp99\tp99.9\tmax\terrors\t"
	fmt.Fprintln(tw, heading)
	line := func(label string, op *Operation, l Latency, errs string) {
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%s\t%s\t%s\t%s\t%s\t%s\t\n", label, op.Count, op.Throughput,
			fmtMs(l.P50), fmtMs(l.P90), fmtMs(l.P99), fmtMs(l.P999), fmtMs(l.Max), errs)
	}
	for _, name := range names {
		op := s.Operations[name]
		line(name, op, op.Response, errorText(op))
	}
	if s.Schedule.Mode == "open" {
		fmt.Fprintln(tw, "service time (from the actual send)\t\t\t\t\t\t\t\t\t")
		for _, name := range names {
			op := s.Operations[name]
			line(name, op, op.Service, "")
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "total: %d operations, %.1f ops/s over %.1fs measured, %d errors\n",
		s.Total.Count, s.Total.Throughput, s.MeasuredSeconds, s.Total.Errors)
	if s.Schedule.Mode == "open" {
		fmt.Fprintf(w, "schedule: target %.1f ops/s; %d slots started late (%.2f%%): %d with every client busy, %d from generator lag\n",
			s.Schedule.TargetRate, s.Schedule.MissedBacklog+s.Schedule.MissedLag, s.Schedule.MissedPercent,
			s.Schedule.MissedBacklog, s.Schedule.MissedLag)
	}
	if s.GeneratorLoad != nil {
		writeGeneratorLoadText(w, s.GeneratorLoad)
	}
	if s.Kube != nil {
		if err := writeKubeText(w, s.Kube); err != nil {
			return err
		}
	}
	if err := writeFaultsText(w, s); err != nil {
		return err
	}
	if s.Incomplete {
		fmt.Fprintf(w, "INCOMPLETE: %s\n", s.IncompleteReason)
	}
	return nil
}

// WriteVerdict writes the run's outcome, the last lines a person reads: the headline word, the outcome and
// one line per reason.
func WriteVerdict(w io.Writer, s *Summary) {
	o := s.Verdict()
	fmt.Fprintf(w, "verdict: %s (%s, exit code %d)\n", o.Headline(), o.Kind, o.ExitCode())
	for _, r := range o.Reasons {
		fmt.Fprintf(w, "  %s: %s\n", r.Kind, r.Text)
	}
	for _, a := range s.Allowed {
		fmt.Fprintf(w, "  allowed: %s\n", a)
	}
	for _, c := range s.Crashes {
		fmt.Fprintf(w, "  last lines of %s's log (%s):\n", c.Member, c.Log)
		tail := c.Excerpt(8)
		for _, l := range tail {
			fmt.Fprintf(w, "    %s\n", l)
		}
	}
}

func errorText(op *Operation) string {
	if op.Errors == 0 || len(op.ErrorsByClass) == 0 {
		return strconv.FormatInt(op.Errors, 10)
	}
	classes := make([]string, 0, len(op.ErrorsByClass))
	for class, n := range op.ErrorsByClass {
		classes = append(classes, fmt.Sprintf("%s:%d", class, n))
	}
	sort.Strings(classes)
	return fmt.Sprintf("%d (%s)", op.Errors, strings.Join(classes, " "))
}

func fmtMs(v float64) string {
	switch {
	case v == 0:
		return "-"
	case v < 1:
		return fmt.Sprintf("%.0fus", v*1000)
	case v < 100:
		return fmt.Sprintf("%.2fms", v)
	case v < 10000:
		return fmt.Sprintf("%.0fms", v)
	}
	return fmt.Sprintf("%.1fs", v/1000)
}

// Split describes a load split over several generators (chaosbench run --workers).
type Split struct {
	// Workers is the number of generators.
	Workers int `json:"workers"`
	// Worker is this run's index, -1 on the merged run.
	Worker int `json:"worker"`
	// StartAt is the common start time on the reference clock.
	StartAt time.Time `json:"start_at,omitzero"`
	// Clock is this worker's clock against the reference (on a worker's run).
	Clock *WorkerClock `json:"clock,omitempty"`
	// Observer marks the coordinator's run that held the cluster, the faults and etcd's metrics and sent
	// no load, when every worker ran in a container.
	Observer bool `json:"observer,omitempty"`
	// MeasuredFromNs and LoadEndNs bound this run's measured load (after the warm-up), as offsets from its
	// time base: the merge lays the workers' windows on one timeline for the merged phase tables.
	MeasuredFromNs int64 `json:"measured_from_ns,omitempty"`
	LoadEndNs      int64 `json:"load_end_ns,omitempty"`
	// Records says the run logged its measured records (RecordsFile) for the merged phase tables.
	Records bool `json:"records,omitempty"`
	// Members are the workers' runs, on the merged run.
	Members []SplitWorker `json:"members,omitempty"`
}

// WorkerClock is a worker's clock against the split load's reference clock: reference time = local time
// + OffsetNs, to within UncertaintyNs either way. StartLateNs is how late the worker's load began against
// the common start.
type WorkerClock struct {
	Reference     string `json:"reference,omitempty"`
	OffsetNs      int64  `json:"offset_ns"`
	UncertaintyNs int64  `json:"uncertainty_ns"`
	RoundTrips    int    `json:"round_trips"`
	StartLateNs   int64  `json:"start_late_ns"`
}

// SplitWorker is one worker of a merged run: its directory, clock, outcome and load.
type SplitWorker struct {
	Worker        int            `json:"worker"`
	Dir           string         `json:"dir"`
	Outcome       outcome.Kind   `json:"outcome"`
	Clock         *WorkerClock   `json:"clock,omitempty"`
	Requests      int64          `json:"requests"`
	Throughput    float64        `json:"throughput"`
	GeneratorLoad *GeneratorLoad `json:"generator_load,omitempty"`
}

// CheckDuringLoad says what the checks of the history run while the load ran did (--check-during-load):
// each checked the history recorded so far and remembered the per-key segments it proved linearizable, so
// that the check after the load did not search them again.
type CheckDuringLoad struct {
	// Checks counts the checks of the history so far that finished; Stopped those the load's end cut short.
	Checks  int `json:"checks"`
	Stopped int `json:"stopped,omitempty"`
	// Operations is the number of operations the last finished check covered.
	Operations int `json:"operations"`
	// ProvedPartitions is the number of per-key segments proved linearizable during the load;
	// ReusedPartitions how many of the check after the load's Partitions were among them.
	ProvedPartitions int `json:"proved_partitions"`
	ReusedPartitions int `json:"reused_partitions"`
	Partitions       int `json:"partitions"`
	// Seconds is the wall time the checks during the load took, in all.
	Seconds float64 `json:"seconds"`
	// Errors are the checks that failed (a copy or a read that failed): they proved nothing, which costs
	// the check after the load time, not its verdict.
	Errors []string `json:"errors,omitempty"`
}
