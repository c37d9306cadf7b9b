package results

import (
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
	c := Crash{Member: "m2", Status: "exit status 2", LogTail: LogTail(log, 5)}
	if want := lines[2:]; !slices.Equal(c.LogTail, want) {
		t.Fatalf("LogTail = %q, want the last 5 lines %q", c.LogTail, want)
	}
	// The panic line fell out of the last five: the last line that says something is the reason.
	if got := c.Why(); got != "/x/main.go:1 +0x1" {
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
