package faults

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/clusters/etcdbuild"
	"github.com/etcd-chaosbench/chaosbench/internal/testenv"
	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// proxyUnreachable matches the go command's errors when it cannot reach the module proxy at all.
var proxyUnreachable = regexp.MustCompile(`dial tcp|no such host|connection refused|i/o timeout|proxyconnect|TLS handshake timeout`)

// failpointBuild returns the binary of etcd v3.6.16 built with failpoints (built once, then cached),
// skipping the test only when the Go module proxy cannot serve it.
func failpointBuild(t *testing.T) string {
	t.Helper()
	r, err := etcdbuild.Parse("v3.6.16")
	if err != nil {
		t.Fatal(err)
	}
	r.Failpoints = true
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	bin, err := etcdbuild.Build(ctx, r, etcdbuild.Options{})
	if err != nil {
		if outcome.IsUsage(err) || proxyUnreachable.MatchString(err.Error()) {
			testenv.Missing(t, testenv.Failpoints, "skipping: the Go module proxy cannot serve etcd v3.6.16 and gofail v0.2.0 for a failpoint build: %v", err)
		}
		t.Fatalf("failpoint build of etcd v3.6.16: %v", err)
	}
	return bin
}

// TestNemesisPicksFailpoints: a nemesis that names no kinds adds failpoint faults to its picks when the
// members serve failpoints, and only then; every failpoint it picks is one the release has; and its picks
// replay with the seed.
func TestNemesisPicksFailpoints(t *testing.T) {
	t.Parallel() // judges behaviour, not latency (see TestMain)
	bin := failpointBuild(t)
	names, err := etcdbuild.FailpointNames(bin)
	if err != nil {
		t.Fatal(err)
	}
	withFailpoints := startCluster(t, clusters.EmbedOptions{Members: 1, Command: []string{bin}, Failpoints: true})
	plain := startCluster(t, clusters.EmbedOptions{Members: 1})
	s, err := Parse([]string{"nemesis@10s+5s"})
	if err != nil {
		t.Fatal(err)
	}
	picks := func(c clusters.Cluster) []Entry {
		r := &Runner{env: NewEnv(c, t.TempDir(), 1, nil)}
		var out []Entry
		for i := range 200 {
			e, err := r.pickNemesis(s.Entries[0], seeded(1, "nemesis", i))
			if err != nil {
				t.Fatalf("pick %d: %v", i, err)
			}
			out = append(out, e)
		}
		return out
	}
	first := picks(withFailpoints)
	failpoints := 0
	for i, e := range first {
		if e.Kind != KindFailpoint {
			continue
		}
		failpoints++
		if err := (Schedule{Entries: []Entry{e}}).CheckFailpoints(names); err != nil {
			t.Errorf("pick %d, %s: %v", i, e.Spec, err)
		}
	}
	if failpoints == 0 {
		t.Errorf("200 picks on members with failpoints picked no failpoint")
	}
	for i, e := range picks(withFailpoints) {
		if e.Spec != first[i].Spec {
			t.Fatalf("pick %d: %s, then %s with the same seed", i, first[i].Spec, e.Spec)
		}
	}
	for _, e := range picks(plain) {
		if e.Kind == KindFailpoint {
			t.Fatalf("the builtin etcd serves no failpoints, yet the nemesis picked %s", e.Spec)
		}
	}
	t.Logf("%d of 200 picks were failpoints", failpoints)
}

// TestFailpointPanicAsWindowEnds: a member armed to panic that reaches the point just as its window ends
// (here: the moment its gofail endpoint stops answering, before anything noticed the exit) is recorded as
// panicked and started again on its data, not reported as a failed heal.
func TestFailpointPanicAsWindowEnds(t *testing.T) {
	bin := failpointBuild(t)
	c := startCluster(t, clusters.EmbedOptions{Members: 1, Command: []string{bin}, Failpoints: true})
	cli := newClient(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cli.Put(ctx, "before", "the panic"); err != nil {
		t.Fatal(err)
	}
	f, lc := armFailpoint(ctx, t, c, "failpoint:random=defragBeforeCopy:panic@0s+1s")
	m := c.Members()[0]
	go cli.Defragment(ctx, m.ClientURL()) // reaches defragBeforeCopy, which panics
	url := c.FailpointURL(m.Name()) + "/"
	for {
		if _, err := failpointRequest(ctx, "GET", url, ""); err != nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the member never reached the failpoint")
		}
	}
	if err := lc.Recover(ctx); err != nil {
		t.Fatalf("recover: %v", err)
	}
	e := f.Effect()
	if e == nil || len(e.Panicked) != 1 || e.Panicked[0] != m.Name() {
		t.Fatalf("effect %+v, want %s panicked", e, m.Name())
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}
	resp, err := cli.Get(ctx, "before")
	if err != nil || len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != "the panic" {
		t.Fatalf("after the restart: %v, %v: the member did not start on its data", resp, err)
	}
}

// TestFailpointClearedByKill: a kill that restarts the armed member inside the failpoint's window takes
// the failpoint with the old process. The failpoint's heal is then no error (there is nothing to disarm),
// its effect says what happened, and it still reports that it cannot tell whether the point was reached:
// a fault that may not have happened is never silently fine. A failpoint whose member is down at the
// window's end (the kill's window still open) is neither disarmed nor started by it.
func TestFailpointClearedByKill(t *testing.T) {
	bin := failpointBuild(t)
	c := startCluster(t, clusters.EmbedOptions{Members: 1, Command: []string{bin}, Failpoints: true})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	m := c.Members()[0].(clusters.Process)
	arm := func() (*Failpoint, *Lifecycle) {
		return armFailpoint(ctx, t, c, "failpoint:random=defragBeforeCopy:sleep(10ms)@0s+1s")
	}

	f, lc := arm()
	pid := m.PID()
	if err := m.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lc.Recover(ctx); err != nil {
		t.Fatalf("recover after the member was restarted: %v", err)
	}
	if e := f.Effect(); e == nil || !strings.Contains(e.Detail, "restarted during the window") || strings.Contains(e.Detail, "panicked") {
		t.Errorf("effect %+v, want the restart (pid %d) said", e, pid)
	}
	if msg := f.NotFired(); !strings.Contains(msg, "unknown") {
		t.Errorf("NotFired() = %q, want it to say whether it was reached is unknown", msg)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}

	f, lc = arm()
	if err := m.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lc.Recover(ctx); err != nil {
		t.Fatalf("recover while the member is down: %v", err)
	}
	if m.Running() {
		t.Errorf("the failpoint's heal started a member another fault had stopped")
	}
	if e := f.Effect(); e == nil || !strings.Contains(e.Detail, "was down at the window's end") {
		t.Errorf("effect %+v, want the member down said", e)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(ctx); err != nil {
		t.Fatal(err)
	}

	// Armed to panic and down at the window's end: a kill stopped it, not the failpoint, so the heal
	// neither counts a panic nor starts the member the kill's own heal starts.
	f, lc = armFailpoint(ctx, t, c, "failpoint:random=defragBeforeCopy:panic@0s+1s")
	if err := m.Kill(ctx); err != nil {
		t.Fatal(err)
	}
	if err := lc.Recover(ctx); err != nil {
		t.Fatalf("recover while the member is down: %v", err)
	}
	if m.Running() {
		t.Errorf("the heal of a failpoint armed to panic started a member another fault had stopped")
	}
	if e := f.Effect(); e == nil || !strings.Contains(e.Detail, "was down at the window's end") || len(e.Panicked) > 0 {
		t.Errorf("effect %+v, want the member down said and no panic counted", e)
	}
	if msg := f.NotFired(); !strings.Contains(msg, "unknown") {
		t.Errorf("NotFired() = %q, want it to say whether it was reached is unknown", msg)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
}

// armFailpoint injects the failpoint fault spec on cluster c and returns it with its lifecycle, whose
// Recover heals it.
func armFailpoint(ctx context.Context, t *testing.T, c clusters.Cluster, spec string) (*Failpoint, *Lifecycle) {
	t.Helper()
	lc := injectEntry(t, c, spec)
	if err := lc.Inject(ctx); err != nil {
		t.Fatal(err)
	}
	return lc.f.(*Failpoint), lc
}
