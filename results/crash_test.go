package results

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestCrashLog(t *testing.T) {
	log := filepath.Join(t.TempDir(), "m2.log")
	lines := []string{`{"level":"info","msg":"serving client traffic"}`, "panic: failpoint panic: {}", "", "goroutine 1 [running]:",
		"main.main()", "\t/x/main.go:1 +0x1", "=== chaosbench: m2 (pid 7) ended at T: exit status 2"}
	if err := os.WriteFile(log, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// The panic line lies before the last five: the tail starts at it, so that it still says why.
	c := Crash{Member: "m2", Status: "exit status 2", LogTail: LogTail(log, 5)}
	if want := lines[1:6]; !slices.Equal(c.LogTail, want) {
		t.Fatalf("LogTail = %q, want the 5 lines from the panic %q", c.LogTail, want)
	}
	if got := c.Why(); got != "panic: failpoint panic: {}" {
		t.Fatalf("Why = %q", got)
	}
	c.LogTail = LogTail(log, 20)
	if got := c.Why(); got != "panic: failpoint panic: {}" {
		t.Fatalf("Why = %q, want the panic line", got)
	}
	if got := c.Excerpt(3); !slices.Equal(got, lines[1:4]) {
		t.Fatalf("Excerpt(3) = %q, want from the panic line %q", got, lines[1:4])
	}
	if !strings.Contains(c.Text(), "member m2 crashed (exit status 2): panic: failpoint panic") {
		t.Fatalf("Text = %q", c.Text())
	}
	s := &Summary{Crashes: []Crash{c}}
	if o := Decide(s); o.Kind != "member-crashed" || o.ExitCode() != 4 {
		t.Fatalf("Decide = %v (exit %d), want member-crashed, exit 4", o, o.ExitCode())
	}
	if LogTail(filepath.Join(t.TempDir(), "absent.log"), 5) != nil {
		t.Fatal("LogTail of a missing file is not nil")
	}
}

// TestCrashLogLongPanic: etcd's panics log a zap entry, then Go prints its panic line and a goroutine dump of
// tens of lines: the tail starts at the zap entry, and the reason is Go's short panic line. Without a panic,
// the tail is the last lines and the reason the last one.
func TestCrashLogLongPanic(t *testing.T) {
	dir := t.TempDir()
	lines := []string{`{"level":"info","msg":"applied"}`,
		`{"level":"panic","msg":"unexpected error during txn","error":"context canceled","stacktrace":"..."}`,
		"panic: unexpected error during txn", "", "goroutine 2957 [running]:"}
	for i := range 60 {
		lines = append(lines, fmt.Sprintf("\tgo.etcd.io/etcd/server/v3@v3.5.4/x.go:%d +0x1", i))
	}
	log := filepath.Join(dir, "m2.log")
	if err := os.WriteFile(log, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c := Crash{Member: "m2", Status: "exit status 2", LogTail: LogTail(log, CrashLogLines)}
	if len(c.LogTail) != CrashLogLines || c.LogTail[0] != lines[1] {
		t.Fatalf("LogTail starts %q (%d lines), want the zap panic entry and %d lines", c.LogTail[0], len(c.LogTail), CrashLogLines)
	}
	if got := c.Why(); got != "panic: unexpected error during txn" {
		t.Fatalf("Why = %q", got)
	}
	quiet := filepath.Join(dir, "m3.log")
	if err := os.WriteFile(quiet, []byte(strings.Join(lines[5:], "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := LogTail(quiet, 3); !slices.Equal(got, lines[len(lines)-3:]) {
		t.Fatalf("LogTail without a panic = %q, want the last 3 lines", got)
	}
}
