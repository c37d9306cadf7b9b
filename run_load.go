package chaosbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/clusters/shapes"
	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/history"
	"github.com/etcd-chaosbench/chaosbench/results/live"
	"github.com/etcd-chaosbench/chaosbench/workloads"
	"github.com/etcd-chaosbench/chaosbench/workloads/kubeapi"
)

// startRecording creates where every operation's record goes (the history, the collector, the live
// metrics, a split worker's record log, the fault schedule's phases) and the recorder that times them all.
// The fault schedule starts here, so that its phases share the records' time base; its runner waits for
// the load to begin.
func (r *run) startRecording() error {
	base := time.Now()
	var err error
	if r.s.History {
		if r.history, err = history.NewWriter(r.dir); err != nil {
			return err
		}
	}
	if r.collector, err = results.NewCollector(results.CollectorOptions{Dir: r.dir, Start: base, Warmup: r.s.Warmup}); err != nil {
		return err
	}
	var onFault func(string, []string, bool)
	sinks := []results.Sink{r.collector}
	if r.live != nil {
		onFault = r.live.Fault
		sinks = append(sinks, r.live)
	}
	if r.split != nil && !r.split.observer {
		// The merge files every worker's requests under worker 0's fault phases (results/merge).
		if r.records, err = results.NewRecordLog(filepath.Join(r.dir, results.RecordsFile), r.s.Warmup); err != nil {
			return err
		}
		sinks = append(sinks, r.records)
	}
	faultSinks, err := r.faults.start(r.cluster, r.dir, base, r.s, r.out, onFault)
	if err != nil {
		return err
	}
	r.rec = workloads.NewRecorder(base, r.history, valueFill(r.s.Seed), append(sinks, faultSinks...)...)
	return nil
}

// valueFill returns the filler bytes of written values, drawn from the run's seed so that a replay writes
// the same values.
func valueFill(seed int64) []byte {
	fill := make([]byte, 64<<10)
	rng := rand.New(rand.NewPCG(uint64(seed), 0x76616c7565)) // "value"
	for i := range fill {
		fill[i] = byte(rng.Uint32())
	}
	return fill
}

// startClients connects the load's clients to the cluster (through the counting proxies when the run
// counts request shapes).
func (r *run) startClients(runOpts workloads.RunOptions) error {
	if err := r.startShapes(); err != nil {
		return err
	}
	cfg := clusters.LoadClientConfig(r.cluster)
	cfg.Endpoints = r.clientEndpoints()
	var err error
	if r.clientLog, err = os.OpenFile(filepath.Join(r.dir, "client.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err != nil {
		return fmt.Errorf("client log: %w", err)
	}
	cfg.Logger = fileLogger(r.clientLog)
	if r.runner, err = workloads.NewRunner(cfg, r.rec, runOpts); err != nil {
		return err
	}
	return nil
}

// fileLogger returns a zap logger that writes the etcd client's warnings to f, so that retries during
// faults do not flood the terminal.
func fileLogger(f *os.File) *zap.Logger {
	enc := zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig())
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(f), zap.WarnLevel))
}

// setUpWorkload prepares the workload on the running cluster (its preload; for the controlplane workload,
// the real control plane in front of the cluster first) before the load is timed.
func (r *run) setUpWorkload(ctx context.Context, wl workloads.Workload) error {
	r.wl = wl
	cpw, isControlPlane := wl.(*kubeapi.Workload)
	if isControlPlane {
		if err := r.startControlPlane(ctx, cpw); err != nil {
			return err
		}
	}
	if err := wl.Setup(ctx, r.runner); err != nil {
		return fmt.Errorf("set up workload %s: %w", wl.Name(), err)
	}
	if isControlPlane {
		// controlplane.json covers the load, not the set-up.
		snap := r.controlPlane.Snapshot(ctx)
		r.cpBefore = &snap
		r.saveScrapes(ctx, snap, 1)
	}
	return nil
}

// runLoad runs the workload's load and heals the faults once it is over. What the load cost the generator
// (CPU, live heap) and the Env hooks around it cover the load alone, not the set-up or the teardown.
func (r *run) runLoad(ctx context.Context, wl workloads.Workload) error {
	tickCtx, stopTicks := context.WithCancel(context.Background())
	defer stopTicks()
	go r.collector.Run(tickCtx)
	stopProgress := r.startProgress()
	if r.split != nil {
		if err := r.split.startTogether(ctx, r.out); err != nil {
			stopProgress()
			return err
		}
	}
	for _, p := range r.shapes {
		p.Reset() // the set-up's requests are not the load's
	}
	if r.env.LoadBegan != nil {
		r.env.LoadBegan(ctx, r.cluster)
	}
	r.startReadDuringLoad()
	r.startCheckDuringLoad(ctx)
	defer r.stopCheckDuringLoad()
	cpuBefore := results.CPUTime()
	loadCtx, stopWatching := r.watchLoad(ctx)
	err := wl.Run(loadCtx, r.runner)
	stopWatching()
	r.loadEnded = time.Now()
	r.stopCheckDuringLoad()
	if r.endedEarly != "" && ctx.Err() == nil && errors.Is(err, context.Canceled) {
		err = nil // the load was ended on purpose, not broken
	}
	if r.env.LoadEnded != nil && err == nil {
		r.env.LoadEnded(ctx, r.cluster)
	}
	if werr := r.writeShapes(); werr != nil && err == nil {
		err = werr
	}
	if r.env.AfterLoad != nil {
		r.env.AfterLoad(ctx)
	}
	r.loadEnd = r.rec.Now()
	r.loadCPU = results.CPUTime() - cpuBefore
	r.liveHeap = results.LiveHeap()
	stopProgress()
	r.faults.stop(ctx)
	if err != nil {
		return fmt.Errorf("workload %s: %w", wl.Name(), err)
	}
	return nil
}

// watchLoad asks Env.EndLoad every EndLoadEvery whether the load may end early, and returns the load's
// context, cancelled when it may (endedEarly says why), and what stops the watching. Without EndLoad the
// load's context is ctx.
func (r *run) watchLoad(ctx context.Context) (context.Context, func()) {
	if r.env.EndLoad == nil {
		return ctx, func() {}
	}
	every := r.env.EndLoadEvery
	if every <= 0 {
		every = 5 * time.Second
	}
	loadCtx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-loadCtx.Done():
				return
			case <-tick.C:
			}
			v := LoadView{}
			if from, ok := r.collector.MeasureFrom(); ok && r.rec.Now() > from {
				v.Measured = r.rec.Now() - from
			}
			v.Responses, v.Requests, v.Lagged = r.collector.LiveTotals()
			if r.scraper != nil {
				v.Server = r.scraper.Live()
			}
			if stop, why := r.env.EndLoad(v); stop {
				r.endedEarly = why
				fmt.Fprintf(r.out, "ending the load early after %s measured: %s\n", v.Measured.Round(time.Second), why)
				cancel()
				return
			}
		}
	})
	return loadCtx, func() {
		close(done)
		wg.Wait()
		cancel()
	}
}

// startProgress shows the load's progress on Env.Progress, else on Out, and returns what stops it.
func (r *run) startProgress() (stop func()) {
	progressOut := r.console.Out()
	if r.env.Progress != nil {
		progressOut = r.env.Progress
	}
	return live.StartProgress(live.ProgressOptions{
		Out: progressOut, Console: r.console, Mode: r.s.Progress, Label: r.env.ProgressLabel, LineInterval: r.env.ProgressEvery,
		Duration: r.s.Duration, Total: r.s.Total,
		Live: r.collector.Live,
		Elapsed: func() time.Duration {
			if begin, ok := r.rec.Began(); ok {
				return r.rec.Now() - begin
			}
			return 0
		},
	})
}

// ShapesFile holds the shapes of a run's requests (Env.RequestShapes): shape -> count over the load.
const ShapesFile = "shapes.json"

// startShapes puts a counting proxy in front of every endpoint when the run counts request shapes.
func (r *run) startShapes() error {
	if !r.env.RequestShapes {
		return nil
	}
	if r.cluster.TLS() != nil {
		return outcome.Usagef("request shapes are counted on plaintext clusters only")
	}
	for _, ep := range r.cluster.Endpoints() {
		p, err := shapes.Start(ep, nil, nil)
		if err != nil {
			return err
		}
		r.shapes = append(r.shapes, p)
	}
	return nil
}

// clientEndpoints are the endpoints the load's clients use: the cluster's, or the counting proxies'.
func (r *run) clientEndpoints() []string {
	if len(r.shapes) == 0 {
		return r.cluster.Endpoints()
	}
	eps := make([]string, len(r.shapes))
	for i, p := range r.shapes {
		eps[i] = p.Endpoint()
	}
	return eps
}

// writeShapes writes the request shapes counted over the load.
func (r *run) writeShapes() error {
	if len(r.shapes) == 0 {
		return nil
	}
	counts := map[string]int64{}
	for _, p := range r.shapes {
		for k, v := range p.Counts() {
			counts[k] += v
		}
	}
	data, err := json.MarshalIndent(counts, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(r.dir, ShapesFile), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("request shapes: %w", err)
	}
	return nil
}
