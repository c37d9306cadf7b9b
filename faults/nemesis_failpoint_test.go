package faults

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/clusters/etcdbuild"
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
			t.Skipf("skipping: the Go module proxy cannot serve etcd v3.6.16 and gofail v0.2.0 for a failpoint build: %v", err)
		}
		t.Fatalf("failpoint build of etcd v3.6.16: %v", err)
	}
	return bin
}

// TestNemesisPicksFailpoints: a nemesis that names no kinds adds failpoint faults to its picks when the
// members serve failpoints, and only then; every failpoint it picks is one the release has; and its picks
// replay with the seed.
func TestNemesisPicksFailpoints(t *testing.T) {
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
