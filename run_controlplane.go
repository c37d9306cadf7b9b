package chaosbench

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/clusters/controlplane"
	"github.com/etcd-chaosbench/chaosbench/workloads/kubeapi"
)

// ControlPlaneReport is the file a controlplane run writes beside summary.json: the apiservers' request
// and etcd latencies per verb and resource, and every component's CPU and memory, over the load.
const ControlPlaneReport = "controlplane.json"

// startControlPlane starts the real control plane in front of the cluster and points the workload at it.
func (r *run) startControlPlane(ctx context.Context, w *kubeapi.Workload) error {
	etcd := controlplane.Etcd{Endpoints: r.clientEndpoints()}
	if t, ok := r.cluster.(interface {
		ClientTLSFiles() (clusters.TLSFiles, bool)
	}); ok {
		if files, on := t.ClientTLSFiles(); on {
			etcd.TLS = files
		}
	}
	if r.s.Cluster == "external" && r.s.CACert != "" {
		etcd.TLS = clusters.TLSFiles{CA: r.s.CACert, Cert: r.s.Cert, Key: r.s.Key}
	}
	cfg := w.Config()
	cp, err := controlplane.Start(ctx, controlplane.Options{
		Binaries: r.cpBinaries, Dir: filepath.Join(r.dir, "controlplane"), Etcd: etcd,
		Apiservers: cfg.Apiservers, CompactionInterval: cfg.CompactionInterval, EventTTL: cfg.EventTTL,
		APIServerArgs: r.env.APIServerArgs, ReadyTimeout: r.env.APIServerReadyTimeout, Log: r.out,
	})
	if err != nil {
		return err
	}
	r.controlPlane = cp
	tlsFiles := cp.ClientTLS()
	w.SetTarget(kubeapi.Target{URLs: cp.APIServerURLs(), CA: tlsFiles.CA, Cert: tlsFiles.Cert, Key: tlsFiles.Key})
	return nil
}

// stopControlPlane takes the last snapshot, writes controlplane.json and prints its tables, then stops
// every component. It runs before the cluster stops, while the apiservers can still answer.
func (r *run) stopControlPlane(ctx context.Context) error {
	if r.controlPlane == nil {
		return nil
	}
	defer r.controlPlane.Close(ctx)
	if r.cpBefore == nil {
		return nil
	}
	rep := controlplane.Compare(*r.cpBefore, r.controlPlane.Snapshot(ctx))
	type file struct {
		controlplane.Report
		Workload *kubeapi.Stats `json:"workload,omitempty"`
	}
	f := file{Report: rep}
	if w, ok := r.wl.(*kubeapi.Workload); ok {
		f.Workload = w.Stats()
	}
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("write %s: %w", ControlPlaneReport, err)
	}
	if err := os.WriteFile(filepath.Join(r.dir, ControlPlaneReport), append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", ControlPlaneReport, err)
	}
	fmt.Fprintln(r.out)
	return rep.WriteText(r.out)
}
