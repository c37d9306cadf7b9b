package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io/fs"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/internal/testenv"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/live"
)

// freePort returns a loopback port nothing listens on.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// startPrometheus starts Debian's prometheus on loopback, scraping target every second and accepting
// remote writes, and returns its base URL; it is stopped with the test.
func startPrometheus(t *testing.T, target string) string {
	t.Helper()
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		testenv.Missing(t, testenv.Prometheus, "prometheus is not installed (Debian's prometheus package; .ci/run installs it): the live metrics test needs a real one")
	}
	dir := t.TempDir()
	cfg := fmt.Sprintf("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: chaosbench\n    static_configs:\n      - targets: [%q]\n", target)
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr, "--web.enable-remote-write-receiver")
	logf, _ := os.Create(filepath.Join(dir, "prometheus.log"))
	cmd.Stdout, cmd.Stderr = logf, logf
	// Prometheus dies with the test binary, however that ends (a killed test runs no cleanup).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
	})
	base := "http://" + addr
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if resp, err := http.Get(base + "/-/ready"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
	}
	// Prometheus hands discovered targets to its scrape loops every five seconds: a run started before then
	// would go unscraped for its first seconds, fault included.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		resp, err := http.Get(base + "/api/v1/targets?state=active")
		if err != nil {
			continue
		}
		var body struct {
			Data struct {
				ActiveTargets []struct {
					ScrapeURL string `json:"scrapeUrl"`
				} `json:"activeTargets"`
			} `json:"data"`
		}
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if err == nil && len(body.Data.ActiveTargets) > 0 {
			return base
		}
	}
	b, _ := os.ReadFile(filepath.Join(dir, "prometheus.log"))
	t.Fatalf("prometheus did not become ready with its target:\n%s", b)
	return ""
}

// promQuery evaluates an instant query at time at and returns each series' labels and value. Queries name
// their time: once the run has exited, the next failed scrape marks its series stale, and a query at "now"
// would find nothing.
func promQuery(t *testing.T, base, q string, at time.Time) []promSample {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("%s/api/v1/query?query=%s&time=%.3f", base, url.QueryEscape(q), float64(at.UnixMilli())/1000))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
				Values [][2]any          `json:"values"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || body.Status != "success" {
		t.Fatalf("query %s: %v %s", q, err, body.Error)
	}
	var out []promSample
	for _, r := range body.Data.Result {
		s := promSample{Labels: r.Metric}
		if v, ok := r.Value[1].(string); ok {
			s.Value, _ = strconv.ParseFloat(v, 64)
		}
		for _, v := range r.Values {
			x, _ := strconv.ParseFloat(v[1].(string), 64)
			s.Series = append(s.Series, x)
		}
		out = append(out, s)
	}
	return out
}

// lingerClock is the run's output; it notes when the run says it is lingering, its counts and verdicts final.
type lingerClock struct {
	mu     sync.Mutex
	buf    bytes.Buffer
	linger time.Time
}

func (c *lingerClock) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.Write(p)
	if c.linger.IsZero() && strings.Contains(c.buf.String(), "metrics: serving for") {
		c.linger = time.Now()
	}
	return len(p), nil
}

type promSample struct {
	Labels map[string]string
	Value  float64
	Series []float64
}

// TestLiveMetricsInPrometheus: a real Prometheus scrapes a short run's /metrics and receives its remote
// writes. Its request count for put equals summary.json's; its p99 of put, from the classic buckets, lies
// in the bucket that holds the run's exact p99; the pause's gauge was 1 during the fault and 0 after; the
// remote-written series carry the same count; and the bearer token given in a file appears nowhere.
func TestLiveMetricsInPrometheus(t *testing.T) {
	port := freePort(t)
	target := fmt.Sprintf("127.0.0.1:%d", port)
	prom := startPrometheus(t, target)

	secret := "s3cret-token-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	tokenFile := filepath.Join(t.TempDir(), "token")
	os.WriteFile(tokenFile, []byte(secret+"\n"), 0o600)
	out := filepath.Join(t.TempDir(), "run")
	args := []string{"run", "--out", out, "--members", "1", "--workload", "put", "--rate", "100", "--clients", "4",
		"--conns", "1", "--duration", "8s", "--faults", "pause:m1@3s+2s", "--progress", "none",
		"--metrics-addr", target, "--metrics-linger", "4s",
		"--prometheus-remote-write", prom + "/api/v1/write", "--prometheus-remote-write-interval", "1s",
		"--prometheus-remote-write-bearer-token-file", tokenFile}
	start := time.Now()
	var clock lingerClock
	cmd := exec.Command(binary, args...)
	cmd.Stdout, cmd.Stderr = &clock, &clock
	err := cmd.Run()
	b := clock.buf.Bytes()
	if err != nil {
		t.Fatalf("chaosbench run: %v\n%s", err, b)
	}
	if clock.linger.IsZero() {
		t.Fatalf("the run never said it lingers:\n%s", b)
	}
	// Three seconds into the four-second linger: scraped at least twice with the final figures, not yet stale.
	final := clock.linger.Add(3 * time.Second)
	s, err := results.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	put := s.Operations["put"]
	run := filepath.Base(out)

	scraped := promQuery(t, prom, fmt.Sprintf(`chaosbench_requests_total{op="put",job="chaosbench",run=%q}`, run), final)
	if len(scraped) != 1 || int64(scraped[0].Value) != put.Count {
		t.Fatalf("scraped put requests %+v, summary.json %d", scraped, put.Count)
	}
	pushed := promQuery(t, prom, fmt.Sprintf(`chaosbench_requests_total{op="put",job="",run=%q}`, run), final)
	if len(pushed) != 1 || int64(pushed[0].Value) != put.Count {
		t.Fatalf("remote-written put requests %+v, summary.json %d", pushed, put.Count)
	}

	// p99 from the buckets, against the bucket that holds the run's exact p99.
	q := promQuery(t, prom, fmt.Sprintf(`histogram_quantile(0.99, chaosbench_response_seconds_bucket{op="put",job="chaosbench",run=%q})`, run), final)
	if len(q) != 1 {
		t.Fatalf("p99: %+v", q)
	}
	exact := put.Response.P99 / 1000
	lo, hi := 0.0, math.Inf(1)
	for _, b := range live.Buckets {
		if b < exact {
			lo = b
		} else {
			hi = b
			break
		}
	}
	if got := q[0].Value; got < lo || got > hi {
		t.Errorf("p99 from Prometheus %.4f s, summary.json %.4f s: not within its bucket [%g, %g]", got, exact, lo, hi)
	}

	// Every scraped sample of the pause's gauge, in order: 1 while the member was stopped, 0 after.
	gauge := promQuery(t, prom, fmt.Sprintf(`chaosbench_fault_active{kind="pause",target="m1",job="chaosbench",run=%q}[%ds]`,
		run, int(final.Sub(start).Seconds())+1), final)
	var seen []string
	if len(gauge) == 1 {
		for _, v := range gauge[0].Series {
			seen = append(seen, strconv.FormatFloat(v, 'g', -1, 64))
		}
	}
	joined := strings.Join(seen, "")
	if !strings.Contains(joined, "1") || !strings.HasSuffix(joined, "0") {
		up := promQuery(t, prom, fmt.Sprintf(`up{job="chaosbench"}[%ds]`, int(final.Sub(start).Seconds())+1), final)
		dur := promQuery(t, prom, fmt.Sprintf(`scrape_duration_seconds{job="chaosbench"}[%ds]`, int(final.Sub(start).Seconds())+1), final)
		t.Errorf("fault gauge over the run %v: want 1 during the pause and 0 after\nscrapes up %+v\nscrape durations %+v\n%s", seen, up, dur, b)
	}
	if v := promQuery(t, prom, fmt.Sprintf(`chaosbench_outcome{outcome="ok",run=%q}`, run), final); len(v) == 0 {
		t.Errorf("no outcome series for the run")
	}

	// The token is read from its file and sent; it is never written or printed.
	if strings.Contains(string(b), secret) {
		t.Errorf("the output holds the bearer token")
	}
	filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if data, _ := os.ReadFile(p); strings.Contains(string(data), secret) {
				t.Errorf("%s holds the bearer token", p)
			}
		}
		return nil
	})
}
