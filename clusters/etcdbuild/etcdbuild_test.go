package etcdbuild

import (
	"context"
	"debug/elf"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
)

func TestParse(t *testing.T) {
	tests := []struct {
		in     string
		want   Release
		errHas string
	}{
		{in: "v3.6.16", want: Release{Version: "v3.6.16", Module: "go.etcd.io/etcd/server/v3", ModuleVersion: "v3.6.16", Minor: 6}},
		{in: "3.5.35", want: Release{Version: "v3.5.35", Module: "go.etcd.io/etcd/server/v3", ModuleVersion: "v3.5.35", Minor: 5}},
		{in: " v3.7.0-rc.0 ", want: Release{Version: "v3.7.0-rc.0", Module: "go.etcd.io/etcd/server/v3", ModuleVersion: "v3.7.0-rc.0", Minor: 7}},
		{in: "v3.4.13", want: Release{Version: "v3.4.13", Module: "go.etcd.io/etcd", ModuleVersion: v34Pseudo, Minor: 4}},
		{in: "v3.4.12", errHas: "the only 3.4 release"},
		{in: "v3.3.27", errHas: "3.4.13 and 3.5 or later"},
		{in: "v2.3.8", errHas: "3.4.13 and 3.5 or later"},
		{in: "latest", errHas: "expected a release such as v3.6.16"},
		{in: "v3.6", errHas: "expected a release"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := Parse(tt.in)
			if tt.errHas != "" {
				if !outcome.IsUsage(err) || !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("Parse(%q) = %v, want a usage error about %q", tt.in, err, tt.errHas)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Version != tt.want.Version || got.Module != tt.want.Module || got.ModuleVersion != tt.want.ModuleVersion || got.Minor != tt.want.Minor {
				t.Fatalf("Parse(%q) = %+v, want %+v", tt.in, got, tt.want)
			}
		})
	}
}

// TestBuild builds a release (or finds it in the user's cache, where the container tests put it): a
// static binary that reports its release, found in the cache the second time.
func TestBuild(t *testing.T) {
	r, err := Parse("v3.5.35")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin, err := Build(ctx, r, Options{Log: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked", bin)
		}
	}
	f.Close()
	if v, err := ReportedVersion(ctx, bin); err != nil || v != "3.5.35" {
		t.Fatalf("reported version %q, %v", v, err)
	}
	began := time.Now()
	again, err := Build(ctx, r, Options{})
	if err != nil || again != bin {
		t.Fatalf("second build: %q, %v", again, err)
	}
	if took := time.Since(began); took > time.Second {
		t.Errorf("a cached release took %v", took)
	}
}

func TestBuildNotServed(t *testing.T) {
	r, err := Parse("v3.5.99")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	_, err = Build(ctx, r, Options{CacheDir: dir})
	if !outcome.IsUsage(err) || !strings.Contains(err.Error(), "does not serve") {
		t.Fatalf("got %v, want a usage error saying the proxy does not serve it", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "v3.5.99")); err == nil {
		t.Error("a failed build left a release directory in the cache")
	}
}

func TestLockWaits(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	unlock, err := lock(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := lock(ctx, path); err == nil {
		t.Fatal("a second builder got the lock while the first held it")
	}
	unlock()
	second, err := lock(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	second()
}

// TestBuildFailpoints: a failpoint build of v3.6.16 is cached apart from the plain one, lists the
// failpoints its sources declare (the WAL save and backend commit points among them), and the binary, run
// with GOFAIL_HTTP, serves exactly those failpoints.
func TestBuildFailpoints(t *testing.T) {
	r, err := Parse("v3.6.16")
	if err != nil {
		t.Fatal(err)
	}
	r.Failpoints = true
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	bin, err := Build(ctx, r, Options{Log: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	if filepath.Base(filepath.Dir(bin)) != "v3.6.16-failpoints" {
		t.Errorf("cached at %s, want a directory of its own", bin)
	}
	names, err := FailpointNames(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"raftBeforeSave", "raftAfterSave", "beforeCommit", "afterCommit", "defragBeforeCopy",
		"compactBeforeCommitBatch", "beforeApplyOneEntryNormal", "beforeSendWatchResponse"} {
		if !slices.Contains(names, want) {
			t.Errorf("failpoints %v lack %s", names, want)
		}
	}
	if served := servedFailpoints(t, bin, names); !slices.Equal(served, names) {
		t.Errorf("the binary serves failpoints %v, the build listed %v", served, names)
	}
}

// TestBuildInsertedFailpoints: a failpoint build of v3.5.12, a release without beforeSendWatchResponse and
// compactBeforeSetFinishedCompact, has both inserted: listed, and served by the binary under GOFAIL_HTTP
// (gofail rewrote the inserted comments into failpoints). The insertion set is recorded beside it.
func TestBuildInsertedFailpoints(t *testing.T) {
	r, err := Parse("v3.5.12")
	if err != nil {
		t.Fatal(err)
	}
	r.Failpoints = true
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	bin, err := Build(ctx, r, Options{Log: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	names, err := FailpointNames(bin)
	if err != nil {
		t.Fatal(err)
	}
	served := servedFailpoints(t, bin, names)
	for _, want := range []string{"beforeSendWatchResponse", "compactBeforeSetFinishedCompact", "raftBeforeSave"} {
		if !slices.Contains(names, want) || !slices.Contains(served, want) {
			t.Errorf("%s: listed %v, served %v", want, slices.Contains(names, want), slices.Contains(served, want))
		}
	}
	record, err := os.ReadFile(filepath.Join(filepath.Dir(bin), InsertsFile))
	if err != nil {
		t.Fatal(err)
	}
	if want := insertsVersion + "\nbeforeSendWatchResponse\ncompactBeforeSetFinishedCompact\n"; string(record) != want {
		t.Errorf("%s: %q, want %q", InsertsFile, record, want)
	}
}

// TestCachedNeedsInsertions: a 3.5 failpoint build cached by a builder without the current insertion set
// is not taken from the cache (it lacks failpoints scenarios ask for); a 3.6 one, which needs none, is.
func TestCachedNeedsInsertions(t *testing.T) {
	dir := t.TempDir()
	put := func(key, name, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Join(dir, key), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, key, name), []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	r35, _ := Parse("v3.5.12")
	r35.Failpoints = true
	r36, _ := Parse("v3.6.16")
	r36.Failpoints = true
	put(r35.key(), "etcd", "binary")
	put(r36.key(), "etcd", "binary")
	opts := Options{CacheDir: dir}
	if _, ok := Cached(r35, opts); ok {
		t.Error("a 3.5 failpoint build without an insertion record was taken from the cache")
	}
	put(r35.key(), InsertsFile, "chaosbench-failpoint-inserts 0\n")
	if _, ok := Cached(r35, opts); ok {
		t.Error("a 3.5 failpoint build of an older insertion set was taken from the cache")
	}
	put(r35.key(), InsertsFile, insertsVersion+"\nbeforeSendWatchResponse\n")
	if _, ok := Cached(r35, opts); !ok {
		t.Error("a 3.5 failpoint build of the current insertion set was not taken from the cache")
	}
	if _, ok := Cached(r36, opts); !ok {
		t.Error("a 3.6 failpoint build was not taken from the cache")
	}
}

// servedFailpoints starts bin with GOFAIL_HTTP and returns the failpoints it serves, sorted: asked until
// they are want (or 20 s passed).
func servedFailpoints(t *testing.T, bin string, want []string) []string {
	t.Helper()
	port := freePort(t)
	dir := t.TempDir()
	cmd := exec.Command(bin, "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", fmt.Sprintf("http://127.0.0.1:%d", freePort(t)), "--advertise-client-urls", "http://127.0.0.1:2379",
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", freePort(t)))
	cmd.Env = append(os.Environ(), fmt.Sprintf("GOFAIL_HTTP=127.0.0.1:%d", port))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	// gofail serves from its runtime package's init, before the packages that declare failpoints have
	// registered theirs: ask until the list is whole (or the deadline says some are missing).
	var served []string
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && !slices.Equal(served, want); time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		served = served[:0]
		for _, line := range strings.Fields(string(b)) {
			served = append(served, strings.TrimSuffix(line, "="))
		}
		slices.Sort(served)
	}
	return served
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
