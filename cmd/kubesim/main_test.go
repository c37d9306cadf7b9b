package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcd-chaosbench/chaosbench/linearizability"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/history"
)

func TestBadInputWritesNothing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"-out", dir, "-bug", "stale-reads"}, `-bug "stale-reads": not one of stale-read,`},
		{[]string{"-out", dir, "-rate", "fast"}, `invalid value "fast"`},
		{[]string{"-duration", "1m"}, "usage: kubesim -out DIR"},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(tc.args, &stdout, &stderr); code != 2 {
			t.Errorf("%q: exit code %d, want 2", tc.args, code)
		}
		if !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%q: stderr %q lacks %q", tc.args, stderr.String(), tc.want)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Fatalf("%q: %s was created", tc.args, dir)
		}
	}
}

// TestBugIsCaught: a history written with -bug breaks a guarantee the checker reports, and the same run
// without it checks clean.
func TestBugIsCaught(t *testing.T) {
	for _, tc := range []struct {
		bug   string
		clean bool
	}{{"", true}, {"lost-write", false}} {
		dir := t.TempDir()
		var stdout, stderr bytes.Buffer
		args := []string{"-out", dir, "-duration", "40s", "-rate", "150", "-seed", "3"}
		if tc.bug != "" {
			args = append(args, "-bug", tc.bug)
		}
		if code := run(args, &stdout, &stderr); code != 0 {
			t.Fatalf("%q: exit code %d: %s", args, code, stderr.String())
		}
		if !strings.Contains(stdout.String(), "seed 3, written to "+dir) {
			t.Fatalf("%q printed %q", args, stdout.String())
		}
		if _, err := os.Stat(filepath.Join(dir, history.HistoryFile)); err != nil {
			t.Fatal(err)
		}
		rep, err := linearizability.CheckDir(context.Background(), dir, linearizability.Options{})
		switch {
		case tc.clean && err != nil:
			t.Fatalf("a correct etcd's history: %v; violations: %v", err, rep.Violations)
		case !tc.clean && (!errors.Is(err, linearizability.ErrViolation) || !rep.Violated()):
			t.Fatalf("bug %q: the check returned %v, violated %v", tc.bug, err, rep.Violated())
		}
		for _, c := range rep.Checks {
			if tc.clean && c.Verdict != results.VerdictOK {
				t.Fatalf("a correct etcd's history: %s %s", c.Name, c.Verdict)
			}
		}
	}
}
