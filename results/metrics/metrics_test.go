package metrics

import (
	"bytes"
	"context"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/results"
)

func TestMain(m *testing.M) {
	clusters.RunMemberIfRequested()
	os.Exit(m.Run())
}

func TestQuantile(t *testing.T) {
	inf := math.Inf(1)
	// etcd's WAL fsync layout starts at 1 ms and doubles.
	bounds := []float64{0.001, 0.002, 0.004, 0.008, inf}
	tests := []struct {
		name string
		cum  []float64
		q    float64
		want float64
	}{
		{"all in the first bucket interpolate from zero", []float64{100, 100, 100, 100, 100}, 0.5, 0.0005},
		{"rank in the second bucket", []float64{50, 100, 100, 100, 100}, 0.75, 0.0015},
		{"p99 at a bucket edge", []float64{99, 100, 100, 100, 100}, 0.99, 0.001},
		{"p99 in the third bucket", []float64{0, 0, 100, 100, 100}, 0.99, 0.002 + 0.002*0.99},
		{"rank in +Inf returns the highest finite bound", []float64{0, 0, 0, 0, 10}, 0.5, 0.008},
		{"empty histogram", []float64{0, 0, 0, 0, 0}, 0.99, math.NaN()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := histogram{bounds: bounds, cum: tt.cum}.quantile(tt.q)
			if math.IsNaN(tt.want) {
				if !math.IsNaN(got) {
					t.Fatalf("got %v, want NaN", got)
				}
				return
			}
			if math.Abs(got-tt.want) > 1e-12 {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
		})
	}
}

func readFixture(t *testing.T, name string) *snapshot {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s, err := parse(f)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The fixtures are real expositions of etcd 3.6.16 members of a 3-member cluster (m1 the leader), before
// and after 4000 puts, reduced to the families chaosbench reads plus a few it must ignore.
func TestParseRecordedExposition(t *testing.T) {
	s := readFixture(t, "m1-scrape1.prom")
	checks := []struct {
		name      string
		got, want float64
	}{
		{"wal fsync count", s.walFsync.count(), 3151},
		{"peer rtt count (two peers summed)", s.peerRTT.count(), 4},
		{"is leader", s.isLeader, 1},
		{"has leader", s.hasLeader, 1},
		{"leader changes", s.leaderChanges, 1},
		{"quota", s.quota, 2147483648},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	if s.version != "3.6.16" {
		t.Errorf("version %q", s.version)
	}
	if s.apply.count() == 0 || s.backendCommit.count() == 0 || s.committed < 4000 || s.dbSize == 0 || s.rss == 0 || !s.hasCPU {
		t.Errorf("missing figures: %+v", s)
	}
	if p99 := s.walFsync.quantile(0.99); !(p99 > 0 && p99 < 8.192) {
		t.Errorf("fsync p99 %v s", p99)
	}
	if _, err := parse(strings.NewReader("etcd_server_is_leader{ 1\n")); err == nil {
		t.Error("a malformed exposition parsed")
	}
}

// A member that restarts between scrapes counts from zero again: its counts must neither go negative nor
// lose what came before.
func TestMemberRestartKeepsCounts(t *testing.T) {
	before, after := readFixture(t, "m1-scrape0.prom"), readFixture(t, "m1-scrape1.prom")
	m := &member{name: "m1"}
	m.observe(0, after, false)
	// The member restarted and is back to the earlier (lower) counts, then grows to "after" again.
	restarted := *before
	restarted.startTime = after.startTime + 10
	grown := *after
	grown.startTime = restarted.startTime
	restart := m.observe(time.Second, &restarted, true)
	if restart.WALFsyncCount != int64(before.walFsync.count()) {
		t.Fatalf("interval after restart counted %d fsyncs, want all %v since the restart", restart.WALFsyncCount, before.walFsync.count())
	}
	m.observe(2*time.Second, &grown, true)
	sum := m.summary()
	want := int64(after.walFsync.count())
	if sum.WALFsync.Count != want {
		t.Fatalf("measured %d fsyncs, want %d (restart + growth)", sum.WALFsync.Count, want)
	}
	if sum.LeaderChanges != int64(before.leaderChanges) {
		t.Fatalf("leader changes %d, want %v (the restarted member saw one election)", sum.LeaderChanges, before.leaderChanges)
	}
	if sum.Failed != 0 || sum.Scrapes != 2 || !sum.Leader {
		t.Fatalf("summary %+v", sum)
	}
}

// Scrapes before the measured window are the baseline: the set-up's writes do not count.
func TestMeasuredWindowExcludesSetup(t *testing.T) {
	before, after := readFixture(t, "m2-scrape0.prom"), readFixture(t, "m2-scrape1.prom")
	m := &member{name: "m2"}
	m.observe(0, before, false)
	m.observe(5*time.Second, after, true)
	sum := m.summary()
	if want := int64(after.walFsync.count() - before.walFsync.count()); sum.WALFsync.Count != want {
		t.Fatalf("measured %d fsyncs, want %d", sum.WALFsync.Count, want)
	}
	if want := after.committed - before.committed; sum.ProposalsCommitted != want {
		t.Fatalf("committed %v, want %v", sum.ProposalsCommitted, want)
	}
	if sum.Leader {
		t.Fatal("m2 was a follower")
	}
	if sum.CPUPercentMean <= 0 {
		t.Fatalf("cpu %v", sum.CPUPercentMean)
	}
}

// The scraper against real members: it samples every member, marks a paused member down, and writes its
// files.
func TestScrapeEmbeddedCluster(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	c, err := clusters.StartEmbedded(ctx, clusters.EmbedOptions{Members: 3, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	base := time.Now()
	measureFrom := time.Duration(0)
	s, err := Start(ctx, Options{
		Targets: targetsOf(c), TLS: c.TLS(), Interval: 200 * time.Millisecond, Dir: dir, Base: base,
		MeasureFrom: func() (time.Duration, bool) { return measureFrom, true },
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg := clusters.ClientConfig(c)
	cfg.Logger = zap.NewNop()
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	// The counts are deltas from each member's first sample: the puts go in after it.
	waitScraped(t, s)
	const puts = 100
	for i := range puts {
		if _, err := cli.Put(ctx, "k", strings.Repeat("v", i)); err != nil {
			t.Fatal(err)
		}
	}
	// Pause a follower for longer than a scrape may take.
	leader, err := c.Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var follower clusters.Process
	for _, p := range clusters.Processes(c) {
		if p.Name() != leader.Name() {
			follower = p
			break
		}
	}
	if err := follower.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2500 * time.Millisecond)
	if err := follower.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	sum, err := s.Stop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Members) != 3 {
		t.Fatalf("members %+v", sum.Members)
	}
	for _, m := range sum.Members {
		if m.WALFsync.Count < 20 || m.BackendCommit.Count == 0 || m.Apply.Count < puts {
			t.Errorf("%s: fsync %d, commit %d, apply %d: want the puts counted (fsyncs may batch entries)", m.Name, m.WALFsync.Count, m.BackendCommit.Count, m.Apply.Count)
		}
		if m.Leader != (m.Name == leader.Name()) {
			t.Errorf("%s: leader %v", m.Name, m.Leader)
		}
		if m.Name == follower.Name() && m.Failed == 0 {
			t.Errorf("%s was paused for 2.5 s but no scrape failed", m.Name)
		}
		// What a member says of itself (all an external cluster tells): versions, process, quota.
		if m.ServerVersion == "" || m.RSSBytesMax == 0 || !strings.HasPrefix(m.GoVersion, "go1.") || m.GoroutinesMax == 0 ||
			m.MaxFDs == 0 || m.QuotaBackendBytes == 0 {
			t.Errorf("%s: %+v", m.Name, m)
		}
	}
	if sum.Cluster.WALFsync.P99 <= 0 || sum.Cluster.WALFsyncMember == "" || sum.Cluster.QuotaBackendBytes == 0 {
		t.Errorf("cluster %+v", sum.Cluster)
	}
	if sum.Generator == nil || sum.Generator.HostCPUs == 0 {
		t.Errorf("generator %+v", sum.Generator)
	}
	samples, err := results.ReadServerSamples(dir)
	if err != nil {
		t.Fatal(err)
	}
	down, up := 0, map[string]int{}
	for _, s := range samples {
		if s.Member == results.Generator {
			continue
		}
		if s.Up {
			up[s.Member]++
		} else {
			down++
		}
	}
	if down == 0 || len(up) != 3 || up[leader.Name()] < 10 {
		t.Errorf("samples: %d down, up %v", down, up)
	}
	for _, m := range c.Members() {
		if _, err := os.Stat(filepath.Join(dir, LastScrapeDir, m.Name()+".prom")); err != nil {
			t.Error(err)
		}
	}
}

// Members of an external cluster are scraped through their client URLs, with the cluster's TLS.
func TestScrapeClientURLOverTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dir := t.TempDir()
	c, err := clusters.StartEmbedded(ctx, clusters.EmbedOptions{Members: 1, Dir: dir, TLS: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(context.Background())
	m := c.Members()[0]
	if !strings.HasPrefix(m.ClientURL(), "https://") {
		t.Fatalf("client URL %s", m.ClientURL())
	}
	s, err := Start(ctx, Options{Targets: []Target{{Member: m.Name(), URL: m.ClientURL() + "/metrics"}}, TLS: c.TLS(),
		Interval: 200 * time.Millisecond, Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	// Wait for two answers (a loaded machine, or the race detector, makes members slow to render).
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		samples, _ := results.ReadServerSamples(dir)
		up := 0
		for _, s := range samples {
			if s.Up {
				up++
			}
		}
		if up >= 2 {
			break
		}
	}
	sum, err := s.Stop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := sum.Members[0]; got.Scrapes-got.Failed < 2 || got.ServerVersion == "" {
		t.Fatalf("scrapes over TLS: %+v", got)
	}
	// Without the client certificate the member refuses: the scrape fails, it is not mistaken for data.
	s, _ = Start(ctx, Options{Targets: []Target{{Member: m.Name(), URL: m.ClientURL() + "/metrics"}}, Interval: time.Second})
	sum, _ = s.Stop(ctx)
	if got := sum.Members[0]; got.Failed == 0 {
		t.Fatalf("scrapes without TLS credentials succeeded: %+v", got)
	}
}

// BenchmarkScrape measures what one scrape of a real member costs chaosbench: fetching and parsing its whole
// exposition (about 170 KB), and the parse alone. The generator pays this once per member per interval.
func BenchmarkScrape(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := clusters.StartEmbedded(ctx, clusters.EmbedOptions{Members: 1, Dir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(context.Background())
	s := &Scraper{client: &http.Client{}}
	url := targetsOf(c)[0].URL
	body, _, err := s.fetch(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("parse", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := parse(bytes.NewReader(body)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("fetch+parse", func(b *testing.B) {
		b.SetBytes(int64(len(body)))
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := s.fetch(ctx, url); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// waitScraped waits until s has sampled every member once.
func waitScraped(t *testing.T, s *Scraper) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s.mu.Lock()
		n := s.scrapes
		s.mu.Unlock()
		if n >= len(s.members) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d members scraped after 10 s", n, len(s.members))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// targetsOf returns the metrics endpoints of c's members, as a run finds them.
func targetsOf(c clusters.Cluster) []Target {
	var out []Target
	for _, m := range c.Members() {
		if u := clusters.MetricsURL(m); u != "" {
			out = append(out, Target{Member: m.Name(), URL: u})
		}
	}
	return out
}
