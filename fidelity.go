package chaosbench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/clusters/controlplane"
	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results/compare"
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
	// FromProfile runs the real control plane first, profiles it from its own metrics (ProfileFile in
	// Out) and runs the emulation from that profile instead of the preset.
	FromProfile bool
}

// ProfileFile is the profile `fidelity --profile` reads from the real run and drives the emulation with.
const ProfileFile = "profile.yaml"

// FidelityRow is one quantity measured at etcd in both runs, per second unless it says otherwise. Rows
// are informational: whether a quantity matches is reported, and decides nothing (fidelity has no gate).
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
	// Outcome and Reasons are the job's verdict (fidelityOutcome): its two runs' own outcomes and its own
	// problems; the exit code of `chaosbench fidelity` is this outcome's. The rows and the score are
	// informational.
	Outcome outcome.Kind     `json:"outcome"`
	Reasons []outcome.Reason `json:"reasons,omitempty"`
	// Runs are the emulated and the real run's directories.
	Runs   []string      `json:"runs,omitempty"`
	Preset string        `json:"preset"`
	Rows   []FidelityRow `json:"rows"`
	// Score is the share of rows measured on both sides whose ratio is within FidelityTolerance.
	Score      float64 `json:"score"`
	Comparable int     `json:"comparable"`
	Matching   int     `json:"matching"`
}

// Fidelity runs the kube workload and the real control plane with the same preset, one after the other on
// fresh clusters without faults, and compares what reached etcd during each load. The job's outcome is
// its runs' own with its own problems (fidelityOutcome): a run that found etcd failing is exit 4 here too,
// and the table is written whatever the runs' outcomes, when both sampled etcd. The error carries the
// outcome.
func Fidelity(ctx context.Context, opts FidelityOptions, env Env) (*FidelityReport, error) {
	opts.setDefaults()
	if env.Out == nil {
		env.Out = io.Discard
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return nil, outcome.Usagef("--out %s: %v", opts.Out, err)
	}
	var sides [2]*fidelitySide
	var runs [2]fidelityRun
	var extra []outcome.Reason
	workloadNames := []string{"kube", kubeapi.Name}
	order := []int{0, 1}
	if opts.FromProfile {
		order = []int{1, 0} // the emulation runs from the real run's profile
	}
	for n, i := range order {
		wl := workloadNames[i]
		if wl == "kube" && opts.FromProfile {
			if err := profileRealRun(opts, sides[1], env.Out); err != nil {
				extra = append(extra, outcome.New(outcome.HarnessError, "fidelity: no profile of the real run: %v", err))
				runs[i] = fidelityRun{workload: wl, skipped: true}
				break
			}
		}
		side, err := runFidelitySide(ctx, opts, env, wl)
		if outcome.IsUsage(err) {
			return nil, err
		}
		sides[i], runs[i] = side, fidelityRun{workload: wl, dir: side.dir, err: err}
		if ctx.Err() != nil {
			extra = append(extra, outcome.New(outcome.Incomplete, "fidelity was interrupted during the %s run", wl))
			if n == 0 {
				runs[order[1]] = fidelityRun{workload: workloadNames[order[1]], skipped: true}
			}
			break
		}
	}
	rep := &FidelityReport{Preset: opts.Preset, Runs: []string{runs[0].dir, runs[1].dir}}
	if sampled(sides[0]) && sampled(sides[1]) {
		var err error
		if rep, err = compareFidelity(opts.Preset, sides[0], sides[1]); err != nil {
			rep = &FidelityReport{Preset: opts.Preset}
			extra = append(extra, outcome.New(outcome.HarnessError, "%v", err))
		}
		rep.Runs = []string{sides[0].dir, sides[1].dir}
	} else if ctx.Err() == nil {
		extra = append(extra, outcome.New(outcome.HarnessError, "fidelity: no comparison: a run did not sample etcd where its load began, halfway and where it ended"))
	}
	o := fidelityOutcome(runs, extra...)
	rep.Outcome, rep.Reasons = o.Kind, o.Reasons
	if err := rep.write(opts.Out); err != nil {
		o = outcome.Decide(append(o.Reasons, outcome.New(outcome.HarnessError, "%v", err))...)
	}
	fmt.Fprintf(env.Out, "fidelity score %.0f%% (informational): %d of %d quantities within ±%.0f%%; table in %s\n",
		100*rep.Score, rep.Matching, rep.Comparable, 100*FidelityTolerance, filepath.Join(opts.Out, "fidelity.md"))
	writeVerdict(env.Out, "fidelity", o)
	return rep, o.Err()
}

// fidelityRun is one of the two runs of a fidelity comparison: its workload and directory, and the error
// its run returned; skipped when it never ran (the job was interrupted before it).
type fidelityRun struct {
	workload, dir string
	err           error
	skipped       bool
}

// fidelityOutcome decides a fidelity comparison by the one judge: each run's own outcome (its summary's,
// or, for a run that wrote none, its error's: compare.Run.Outcome), labelled by its workload, with the
// job's own reasons (extra: an interrupt, a comparison that could not be made). Its rows are not part of
// it: they are informational.
func fidelityOutcome(runs [2]fidelityRun, extra ...outcome.Reason) outcome.Outcome {
	var parts []outcome.Part
	for _, r := range runs {
		if r.skipped || r.workload == "" {
			continue
		}
		run, err := compare.ReadRun(r.dir)
		if run.Summary == nil && r.err == nil {
			r.err = err
		}
		run.Err = r.err
		parts = append(parts, outcome.Part{Label: "the " + r.workload + " run", Outcome: run.Outcome()})
	}
	return outcome.Combine(parts, extra...)
}

// sampled says a side read etcd's counters where its load began, halfway and where it ended.
func sampled(side *fidelitySide) bool {
	return side != nil && side.load[0] != nil && side.load[1] != nil && side.mid != nil
}

// setDefaults fills in what the options leave out: the small preset, two minutes on one member, a
// directory of the time and the preset, a fresh seed.
func (opts *FidelityOptions) setDefaults() {
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
}

// fidelityScenario is the run of one side of the comparison: workload wl at the preset (with FromProfile,
// the emulation at the real run's profile), on a fresh cluster, without faults or a history to check.
func fidelityScenario(opts FidelityOptions, wl string) Scenario {
	s := DefaultScenario()
	s.Workload, s.Kube.Preset, s.Members, s.Duration, s.Seed = wl, opts.Preset, opts.Members, opts.Duration, opts.Seed
	if opts.FromProfile && wl == "kube" {
		s.Kube.Preset, s.Profile = "", filepath.Join(opts.Out, ProfileFile)
	}
	s.KubeVersion = opts.KubeVersion
	s.Faults.Schedule = []string{"none"}
	s.History, s.Check = false, false
	s.Out = filepath.Join(opts.Out, wl)
	return s
}

// fidelitySide is one side of the comparison: its run's directory and what was read from etcd during its
// load.
type fidelitySide struct {
	dir  string
	load [2]*etcdSample // at the start and at the end of the load
	mid  *etcdSample    // halfway through the load
}

// runFidelitySide runs workload wl for the comparison, reading etcd's counters where the load begins and
// ends, so that they cover the load alone. It returns the side (with what it sampled) and the run's error,
// which carries its outcome.
func runFidelitySide(ctx context.Context, opts FidelityOptions, env Env, wl string) (*fidelitySide, error) {
	s := fidelityScenario(opts, wl)
	side := &fidelitySide{dir: s.Out}
	// Watchers are counted halfway through the load, while both sides hold their watches (the
	// emulation closes its own when the load ends).
	midDone := make(chan struct{})
	runEnv := env
	runEnv.RequestShapes = true
	runEnv.ProgressLabel = map[string]string{"kube": "1/2 kube workload", kubeapi.Name: "2/2 control plane"}[wl]
	runEnv.LoadBegan = func(ctx context.Context, c clusters.Cluster) {
		side.load[0] = sampleEtcd(ctx, c, false)
		go func() {
			defer close(midDone)
			select {
			case <-time.After(opts.Duration / 2):
				side.mid = sampleEtcd(ctx, c, false)
			case <-ctx.Done():
			}
		}()
	}
	runEnv.LoadEnded = func(ctx context.Context, c clusters.Cluster) { side.load[1] = sampleEtcd(ctx, c, true) }
	fmt.Fprintf(env.Out, "fidelity: %s workload, preset %s, %s\n", wl, opts.Preset, opts.Duration)
	_, err := Run(ctx, s, runEnv)
	if side.load[0] != nil {
		<-midDone
	}
	if err != nil {
		return side, fmt.Errorf("fidelity: the %s run: %w", wl, err)
	}
	return side, nil
}

// compareFidelity compares the emulated side with the real one, row by row: etcd's own counters, the
// requests' shapes, the key space at the end, and the apiservers' etcd requests.
func compareFidelity(preset string, emu, real *fidelitySide) (*FidelityReport, error) {
	rep := &FidelityReport{Preset: preset}
	rep.addEtcdCounters(emu, real)
	if err := rep.addShapes(emu, real); err != nil {
		return nil, err
	}
	rep.addKeySpace(emu.load[1], real.load[1])
	if err := rep.addApiserverOps(emu.dir, real.dir); err != nil {
		return nil, err
	}
	if rep.Comparable > 0 {
		rep.Score = float64(rep.Matching) / float64(rep.Comparable)
	}
	return rep, nil
}

// add adds a row, unless neither side used the quantity (most gRPC methods). Only a quantity both sides
// measured counts towards the score.
func (rep *FidelityReport) add(group, name string, e, r float64) {
	if e == 0 && r == 0 {
		return
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

// addEtcdCounters adds what etcd counted: requests per gRPC method, its own MVCC counters and client bytes
// per second of load, the mean request size, and the watchers halfway through the load.
func (rep *FidelityReport) addEtcdCounters(emu, real *fidelitySide) {
	// Requests begun during the load (grpc_server_started_total), not ended: a stream (Watch) is handled
	// when it ends, and the emulation ends its watch streams with its load, before the end's sample, where
	// the real apiservers hold theirs until they stop; both open them before the load.
	methods := map[string]bool{}
	for _, p := range [][2]*etcdSample{emu.load, real.load} {
		for m := range counterBy(p[1], grpcStarted, "grpc_method") {
			methods[m] = true
		}
	}
	for _, m := range sortedKeys(methods) {
		rep.add("gRPC requests/s", m, rateBy(emu.load, grpcStarted, "grpc_method")[m], rateBy(real.load, grpcStarted, "grpc_method")[m])
	}
	for _, c := range []string{"etcd_mvcc_range_total", "etcd_mvcc_put_total", "etcd_mvcc_txn_total", "etcd_mvcc_delete_total",
		"etcd_debugging_mvcc_events_total"} {
		rep.add("etcd counters/s", strings.TrimPrefix(c, "etcd_"), rateBy(emu.load, c, "")[""], rateBy(real.load, c, "")[""])
	}
	rep.add("etcd counters/s", "client bytes received", rateBy(emu.load, "etcd_network_client_grpc_received_bytes_total", "")[""], rateBy(real.load, "etcd_network_client_grpc_received_bytes_total", "")[""])
	rep.add("etcd counters/s", "client bytes sent", rateBy(emu.load, "etcd_network_client_grpc_sent_bytes_total", "")[""], rateBy(real.load, "etcd_network_client_grpc_sent_bytes_total", "")[""])
	rep.add("sizes", "mean request message bytes", meanRequestBytes(emu.load), meanRequestBytes(real.load))
	for _, g := range []string{"etcd_debugging_mvcc_watcher_total", "etcd_debugging_mvcc_watch_stream_total", "etcd_debugging_mvcc_slow_watcher_total"} {
		rep.add("watch (halfway)", strings.TrimPrefix(g, "etcd_debugging_mvcc_"), gaugeAt(emu.mid, g), gaugeAt(real.mid, g))
	}
}

// grpcStarted counts etcd's gRPC requests and streams as they begin.
const grpcStarted = "grpc_server_started_total"

// meanRequestBytes is the mean size of the request messages etcd received over the load.
func meanRequestBytes(p [2]*etcdSample) float64 {
	msgs := rateBy(p, "grpc_server_msg_received_total", "")[""]
	if msgs == 0 {
		return 0
	}
	return rateBy(p, "etcd_network_client_grpc_received_bytes_total", "")[""] / msgs
}

// addShapes adds the requests per shape (clusters/shapes), per second of load: what the requests ask.
func (rep *FidelityReport) addShapes(emu, real *fidelitySide) error {
	emuShapes, err := emu.shapeRates()
	if err != nil {
		return err
	}
	realShapes, err := real.shapeRates()
	if err != nil {
		return err
	}
	shapeNames := map[string]bool{}
	for _, m := range []map[string]float64{emuShapes, realShapes} {
		for k := range m {
			shapeNames[k] = true
		}
	}
	for _, k := range sortedKeys(shapeNames) {
		rep.add("request shapes/s", k, emuShapes[k], realShapes[k])
	}
	return nil
}

// shapeRates reads the request shapes the side's run counted, per second of its load.
func (side *fidelitySide) shapeRates() (map[string]float64, error) {
	counts, err := readShapes(side.dir)
	if err != nil {
		return nil, err
	}
	rates := map[string]float64{}
	secs := side.load[1].at.Sub(side.load[0].at).Seconds()
	for k, v := range counts {
		if secs > 0 {
			rates[k] = float64(v) / secs
		}
	}
	return rates, nil
}

// addKeySpace adds, per key prefix at the end of the load, the objects and their mean value size.
func (rep *FidelityReport) addKeySpace(emu, real *etcdSample) {
	prefixes := map[string]bool{}
	for k := range emu.keys {
		prefixes[k] = true
	}
	for k := range real.keys {
		prefixes[k] = true
	}
	for _, p := range sortedKeys(prefixes) {
		rep.add("keys (at the end)", p, emu.keys[p], real.keys[p])
	}
	for _, p := range sortedKeys(prefixes) {
		mean := func(s *etcdSample) float64 {
			if s.keys[p] == 0 {
				return 0
			}
			return s.bytes[p] / s.keys[p]
		}
		rep.add("mean value bytes", p, mean(emu), mean(real))
	}
}

// addApiserverOps adds the etcd requests per apiserver operation and resource: the emulation's recorded
// requests against the apiservers' own etcd request metrics.
func (rep *FidelityReport) addApiserverOps(emuDir, realDir string) error {
	emuOps, err := emulatedOps(emuDir)
	if err != nil {
		return err
	}
	realOps, err := realOps(realDir)
	if err != nil {
		return err
	}
	ops := map[string]bool{}
	for k := range emuOps {
		ops[k] = true
	}
	for k := range realOps {
		ops[k] = true
	}
	for _, k := range sortedKeys(ops) {
		rep.add("apiserver etcd requests/s", k, emuOps[k], realOps[k])
	}
	return nil
}

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

// write writes fidelity.md, fidelity.html and fidelity.json into dir, each led by the job's outcome.
func (rep *FidelityReport) write(dir string) error {
	o := outcome.Outcome{Kind: rep.Outcome, Reasons: rep.Reasons}
	runs := append(slices.Clone(rep.Runs), "-", "-")
	var md bytes.Buffer
	fmt.Fprintf(&md, "# Fidelity of the kube workload, preset %s: **%s** — outcome: %s (exit code %d)\n\n", rep.Preset, o.Headline(), o.Kind, o.ExitCode())
	for _, r := range o.Reasons {
		fmt.Fprintf(&md, "- %s: %s\n", r.Kind, mdEscape(r.Text))
	}
	if len(o.Reasons) > 0 {
		md.WriteString("\n")
	}
	fmt.Fprintf(&md, "The outcome is the two runs' own; the table is informational (fidelity has no gate). "+
		"Score: %.0f%% (%d of %d quantities measured in both runs within ±%.0f%%). Emulated: %s; real: %s.\n\n",
		100*rep.Score, rep.Matching, rep.Comparable, 100*FidelityTolerance, runs[0], runs[1])
	fmt.Fprintf(&md, "| group | quantity | emulated | real | real/emulated | within ±%.0f%% (informational) |\n| --- | --- | ---: | ---: | ---: | --- |\n", 100*FidelityTolerance)
	for _, r := range rep.Rows {
		ok := ""
		switch {
		case math.IsNaN(r.Ratio):
			ok = "one side only"
		case r.Match:
			ok = "yes"
		default:
			ok = "no"
		}
		fmt.Fprintf(&md, "| %s | %s | %.3g | %.3g | %s | %s |\n", r.Group, r.Name, r.Emulated, r.Real, ratioText(r), ok)
	}
	var page bytes.Buffer
	fmt.Fprintf(&page, "<!doctype html><meta charset=utf-8><title>fidelity %s: %s (%s)</title><style>body{font-family:sans-serif}td,th{padding:2px 8px;text-align:right}td:nth-child(-n+2){text-align:left}.off{background:#fff8c5}</style>\n",
		html.EscapeString(rep.Preset), o.Headline(), o.Kind)
	fmt.Fprintf(&page, "<h1>Fidelity of the kube workload, preset %s: %s</h1><p>outcome: %s (exit code %d)</p><ul>", html.EscapeString(rep.Preset), o.Headline(), o.Kind, o.ExitCode())
	for _, r := range o.Reasons {
		fmt.Fprintf(&page, "<li>%s: %s</li>", r.Kind, html.EscapeString(r.Text))
	}
	fmt.Fprintf(&page, "</ul><p>The table is informational. Score %.0f%%: %d of %d quantities within ±%.0f%% (highlighted: outside it).</p>\n<table><tr><th>group<th>quantity<th>emulated<th>real<th>real/emulated</tr>\n",
		100*rep.Score, rep.Matching, rep.Comparable, 100*FidelityTolerance)
	for _, r := range rep.Rows {
		class := ""
		if !r.Match && !math.IsNaN(r.Ratio) {
			class = "off"
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

// profileRealRun writes the profile of the real run (its saved scrapes) that the emulation then runs from.
func profileRealRun(opts FidelityOptions, real *fidelitySide, log io.Writer) error {
	if real == nil {
		return errors.New("the real run did not run")
	}
	_, err := Profile(context.Background(), ProfileOptions{Run: real.dir, Name: "controlplane-" + opts.Preset, Out: filepath.Join(opts.Out, ProfileFile)}, log)
	return err
}
