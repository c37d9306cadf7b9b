package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// TestHistoryDumpAndConvert: `history dump` prints a legacy run's history as the JSON lines it holds;
// `history convert` writes the binary files, and dumping them prints the same lines.
func TestHistoryDumpAndConvert(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "linearizability", "testdata", "pass", "faults"))); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := execute(args, &stdout, &stderr); code != outcome.ExitOK {
			t.Fatalf("%v: exit code %d\n%s%s", args, code, stdout.String(), stderr.String())
		}
		return stdout.String()
	}
	for _, f := range []struct {
		legacy string
		args   []string
	}{
		{history.LegacyHistoryFile, nil},
		{history.LegacyWatchFile, []string{"--watches"}},
	} {
		want := canonicalLines(t, mustRead(t, filepath.Join(dir, f.legacy)))
		if got := canonicalLines(t, run(append([]string{"history", "dump", dir}, f.args...)...)); !equalLines(got, want) {
			t.Fatalf("dump of %s: %d lines differ from the file's %d", f.legacy, len(got), len(want))
		}
		defer func() {
			// After the conversion, the binary file dumps to the same records.
			if got := canonicalLines(t, run(append([]string{"history", "dump", dir}, f.args...)...)); !equalLines(got, want) {
				t.Errorf("dump of the converted %s differs from %s", f.legacy, f.legacy)
			}
		}()
	}
	run("history", "convert", dir)
	for _, f := range []string{history.HistoryFile, history.WatchFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}

	// Bad input is a usage error.
	for _, args := range [][]string{{"history", "dump", filepath.Join(dir, "nonexistent")}, {"history", "convert", t.TempDir()}} {
		var stdout, stderr bytes.Buffer
		if code := execute(args, &stdout, &stderr); code != outcome.ExitUsage {
			t.Errorf("%v: exit code %d, want %d\n%s", args, code, outcome.ExitUsage, stderr.String())
		}
	}
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// canonicalLines re-encodes each JSON line through a generic value, so that lines compare by content.
func canonicalLines(t *testing.T, s string) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(bytes.NewReader([]byte(s)))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var v any
		if err := json.Unmarshal(sc.Bytes(), &v); err != nil {
			t.Fatalf("not a JSON line: %v: %s", err, sc.Bytes())
		}
		b, _ := json.Marshal(v)
		out = append(out, string(b))
	}
	return out
}

func equalLines(a, b []string) bool { return len(a) > 0 && slices.Equal(a, b) }
