package controlplane

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters/kubebuild"
	"github.com/etcd-chaosbench/chaosbench/internal/testenv"
)

// binaries returns the default release's cached binaries, or skips the test.
func binaries(t *testing.T) kubebuild.Binaries {
	t.Helper()
	r, err := kubebuild.Parse(kubebuild.DefaultVersion)
	if err != nil {
		t.Fatal(err)
	}
	b, ok := kubebuild.Cached(r, kubebuild.Options{})
	if !ok {
		testenv.Missing(t, testenv.Kube, "Kubernetes %s and KWOK are not in the build cache: `chaosbench image kube` builds them (about 5 minutes; .ci/run does)", kubebuild.DefaultVersion)
	}
	return b
}

// TestNotReady starts a kube-apiserver whose etcd does not answer: Start fails, within its ready timeout or
// when the apiserver gives up on etcd itself, with one line naming the apiserver and the cause, and no
// process it started is left.
func TestNotReady(t *testing.T) {
	b := binaries(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	began := time.Now()
	_, err := Start(ctx, Options{Binaries: b, Dir: dir, Apiservers: 1, ReadyTimeout: 15 * time.Second,
		Etcd: Etcd{Endpoints: []string{"http://127.0.0.1:1"}}})
	if err == nil {
		t.Fatal("an apiserver without etcd became ready")
	}
	msg := err.Error()
	if strings.Contains(msg, "\n") || !strings.Contains(msg, "kube-apiserver-0") || !strings.Contains(msg, "ready") || !(strings.Contains(msg, "etcd") || strings.Contains(msg, "127.0.0.1:1")) {
		t.Fatalf("want one line saying kube-apiserver-0 did not become ready, got %q", msg)
	}
	if took := time.Since(began); took > 45*time.Second {
		t.Errorf("Start took %v to give up", took)
	}
	if left := processesMentioning(dir); len(left) > 0 {
		t.Fatalf("processes left running: %v", left)
	}
}

// TestBadFlag starts a kube-apiserver that exits at once: Start says so, with its last log line, without
// waiting for the ready timeout.
func TestBadFlag(t *testing.T) {
	b := binaries(t)
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	began := time.Now()
	_, err := Start(ctx, Options{Binaries: b, Dir: dir, Apiservers: 1, APIServerArgs: []string{"--no-such-flag"},
		Etcd: Etcd{Endpoints: []string{"http://127.0.0.1:1"}}})
	if err == nil || !strings.Contains(err.Error(), "kube-apiserver-0 exited before it became ready") || !strings.Contains(err.Error(), "no-such-flag") {
		t.Fatalf("got %v", err)
	}
	if took := time.Since(began); took > 20*time.Second {
		t.Errorf("Start took %v to notice the exit", took)
	}
	if left := processesMentioning(dir); len(left) > 0 {
		t.Fatalf("processes left running: %v", left)
	}
}

// processesMentioning returns the live processes whose command line contains s.
func processesMentioning(s string) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(s)) {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && bytes.Contains(stat, []byte(") Z ")) {
			continue
		}
		pids = append(pids, e.Name())
	}
	return pids
}
