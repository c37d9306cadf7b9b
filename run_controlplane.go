package chaosbench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/clusters/controlplane"
	"github.com/etcd-chaosbench/chaosbench/workloads/kube/profile"
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
	// etcd first: scraping an apiserver makes it read etcd's Status (Kubernetes 1.37), which is the
	// harness's request, not the load's, and must not fall in the profile's window.
	r.saveEtcdScrapes(ctx, 2)
	after := r.controlPlane.Snapshot(ctx)
	r.saveApiserverScrapes(after, 2)
	rep := controlplane.Compare(*r.cpBefore, after)
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

// MetricsDir is the directory of a controlplane run that holds every apiserver's and every etcd member's
// /metrics as served where the load began (NAME.1.prom) and where it ended (NAME.2.prom), each led by the
// time of its scrape: the input of `chaosbench profile --run`.
const MetricsDir = "metrics"

// saveScrapes saves every apiserver's metrics text of the snapshot and every etcd member's as scrape n,
// the apiservers first (scrape 1, where the load begins: the Status reads the apiservers' scrapes cost
// etcd fall before etcd's); stopControlPlane saves scrape 2 the other way round.
func (r *run) saveScrapes(ctx context.Context, snap controlplane.Snapshot, n int) {
	r.saveApiserverScrapes(snap, n)
	r.saveEtcdScrapes(ctx, n)
}

// saveScrape saves one process's metrics text as its scrape n, led by the time of the scrape. A scrape
// that fails is left out (a profile then says which process it lacks).
func (r *run) saveScrape(name string, n int, at time.Time, body []byte) {
	dir := filepath.Join(r.dir, MetricsDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	head := profile.ScrapeHeader + at.UTC().Format(time.RFC3339Nano) + "\n"
	_ = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s.%d.prom", name, n)), append([]byte(head), body...), 0o644)
}

// saveApiserverScrapes saves every apiserver's metrics text of a snapshot as scrape n: the profile's
// window of the apiservers is then controlplane.json's, to the scrape (a per-minute timer's request that
// fell between two scrapes of one apiserver would count in one and not the other).
func (r *run) saveApiserverScrapes(snap controlplane.Snapshot, n int) {
	for i, body := range snap.Texts {
		if body != nil {
			r.saveScrape(fmt.Sprintf("kube-apiserver-%d", i), n, snap.ScrapedAt[i], body)
		}
	}
}

// saveEtcdScrapes saves every etcd member's metrics text as scrape n.
func (r *run) saveEtcdScrapes(ctx context.Context, n int) {
	for i, p := range clusters.Processes(r.cluster) {
		if body, err := fetchText(ctx, p.MetricsURL()+"/metrics"); err == nil {
			r.saveScrape(fmt.Sprintf("etcd-%d", i), n, time.Now(), body)
		}
	}
}

// fetchText GETs a URL's body.
func fetchText(ctx context.Context, url string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}
