package chaosbench

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/live"
)

// startLive starts the live metrics, before the cluster: an address that cannot be served is bad input.
func (r *run) startLive() error {
	o := r.s.LiveOptions
	if o.MetricsAddr == "" && o.RemoteWrite == "" {
		return nil
	}
	r.live = live.New(filepath.Base(r.dir))
	if o.MetricsAddr != "" {
		if err := r.live.Serve(o.MetricsAddr); err != nil {
			return outcome.Usagef("%v", err)
		}
		fmt.Fprintf(r.out, "metrics: http://%s/metrics\n", r.live.Addr())
	}
	if o.RemoteWrite != "" {
		w, err := r.live.StartRemoteWrite(live.RemoteWriteOptions{URL: o.RemoteWrite, Interval: o.RemoteWriteInterval,
			BasicAuthUser: o.RemoteWriteUser, BasicAuthPasswordFile: o.RemoteWritePasswordFile,
			BearerTokenFile: o.RemoteWriteTokenFile, Log: r.out})
		if err != nil {
			r.live.Close(context.Background())
			return outcome.Usagef("%v", err)
		}
		r.remoteWrite = w
	}
	return nil
}

// stopLive sets the verdicts, pushes them a last time, lingers for a scraper, and stops serving.
func (r *run) stopLive(ctx context.Context, s *results.Summary) {
	if r.live == nil {
		return
	}
	r.live.Verdicts(s.Checks, string(s.Outcome))
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
	defer cancel()
	if r.remoteWrite != nil {
		pushes, failures, err := r.remoteWrite.Stop(cctx)
		if failures > 0 {
			fmt.Fprintf(r.out, "prometheus remote write: %d of %d pushes failed, the last: %v\n", failures, pushes, err)
		}
	}
	if r.s.LiveOptions.MetricsLinger > 0 && r.live.Addr() != "" && ctx.Err() == nil {
		fmt.Fprintf(r.out, "metrics: serving for %s more\n", r.s.LiveOptions.MetricsLinger)
		time.Sleep(r.s.LiveOptions.MetricsLinger)
	}
	r.live.Close(cctx)
}
