package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/live"
)

const dashboardFile = "../../ci/grafana/chaosbench.json"

// dashboardQueries returns every PromQL expression of a Grafana dashboard: panel targets, annotations and
// templating queries.
func dashboardQueries(content []byte) ([]string, error) {
	var doc any
	if err := json.Unmarshal(content, &doc); err != nil {
		return nil, err
	}
	var out []string
	var walk func(v any, key string)
	walk = func(v any, key string) {
		switch x := v.(type) {
		case map[string]any:
			for k, c := range x {
				walk(c, k)
			}
		case []any:
			for _, c := range x {
				walk(c, key)
			}
		case string:
			if key == "expr" || key == "definition" {
				out = append(out, x)
			}
		}
	}
	walk(doc, "")
	return out, nil
}

var (
	selectorName = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\{`)
	labelValues  = regexp.MustCompile(`label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)`)
)

// seriesNames returns the metric names the queries select (every selector is written name{...}).
func seriesNames(queries []string) []string {
	set := map[string]bool{}
	for _, q := range queries {
		for _, re := range []*regexp.Regexp{selectorName, labelValues} {
			for _, m := range re.FindAllStringSubmatch(q, -1) {
				set[m[1]] = true
			}
		}
	}
	var out []string
	for n := range set {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// exposedNames reads a /metrics exposition and returns its series names (histograms with their
// _bucket, _sum and _count).
func exposedNames(t *testing.T, url string) map[string]bool {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	names := map[string]bool{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, "{")
		name, _, _ = strings.Cut(name, " ")
		names[name] = true
	}
	return names
}

// checkDashboard reports the names the dashboard's queries select that neither chaosbench nor etcd exports.
func checkDashboard(content []byte, exported map[string]bool) error {
	queries, err := dashboardQueries(content)
	if err != nil {
		return err
	}
	if len(queries) < 10 {
		return fmt.Errorf("only %d queries", len(queries))
	}
	var missing []string
	for _, n := range seriesNames(queries) {
		if !exported[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("series nobody exports: %s", strings.Join(missing, ", "))
	}
	return nil
}

// TestGrafanaDashboard: the dashboard is valid JSON, and every series its panels, annotations and
// variables query is exported by chaosbench (its live exporter, fed a request, an error, a late start, a
// fault and a verdict) or by a real 3-member etcd cluster's /metrics. A copy with a misspelled series fails.
func TestGrafanaDashboard(t *testing.T) {
	t.Parallel() // judges outcomes and files, not latency (see TestMain)
	content, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	e := live.New("dashboard-test")
	e.Record(0, &results.Record{Op: "create/pods", Start: time.Millisecond, End: 3 * time.Millisecond, Miss: results.Backlog})
	e.Record(0, &results.Record{Op: "create/pods", Outcome: results.Error, ErrClass: "timeout", End: time.Millisecond})
	e.Fault("kill", []string{"m1"}, true)
	e.Verdicts([]results.Check{{Name: "linearizability", Verdict: results.VerdictOK}}, "ok")
	if err := e.Serve("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	exported := exposedNames(t, "http://"+e.Addr()+"/metrics")

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := clusters.StartEmbedded(ctx, clusters.EmbedOptions{Members: 3, Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("start a cluster: %v", err)
	}
	defer c.Close(context.Background())
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	// etcd records a peer's round trip every 30 s of probing: wait for the first.
	const rtt = "etcd_network_peer_round_trip_time_seconds_bucket"
	var etcd map[string]bool
	for deadline := time.Now().Add(45 * time.Second); ; time.Sleep(time.Second) {
		etcd = exposedNames(t, clusters.Processes(c)[0].MetricsURL()+"/metrics")
		if etcd[rtt] || time.Now().After(deadline) {
			break
		}
	}
	for n := range etcd {
		exported[n] = true
	}

	if err := checkDashboard(content, exported); err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(content), "etcd_disk_wal_fsync_duration_seconds_bucket", "etcd_disk_wal_fsync_seconds_bucket", 1)
	if err := checkDashboard([]byte(broken), exported); err == nil || !strings.Contains(err.Error(), "etcd_disk_wal_fsync_seconds_bucket") {
		t.Fatalf("a misspelled series passed: %v", err)
	}
	if err := checkDashboard([]byte(`{"panels": [`), exported); err == nil {
		t.Fatal("invalid JSON passed")
	}
}
