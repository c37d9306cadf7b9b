package main

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"
)

// TestCommandGroups: `chaosbench --help` lists every command under what it is for, jobs first (run first of
// all), then results, then setup; a new command without a group would land under "Additional Commands",
// where a newcomer does not look.
func TestCommandGroups(t *testing.T) {
	var code int
	root := newRoot(io.Discard, io.Discard, &code)
	want := map[string][]string{
		jobsGroup:    {"run", "qualify", "suite", "explore", "compare", "fidelity"},
		resultsGroup: {"report", "check", "trend", "merge", "history"},
		setupGroup:   {"image", "cluster", "kube", "profile", "clean", "version", "help", "completion"},
	}
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	got := map[string][]string{}
	for _, c := range root.Commands() {
		if c.Hidden {
			continue
		}
		if c.GroupID == "" {
			t.Errorf("command %s is in no group", c.Name())
		}
		got[c.GroupID] = append(got[c.GroupID], c.Name())
	}
	for g, names := range want {
		if !slices.Equal(got[g], names) {
			t.Errorf("group %s: %v, want %v in this order", g, got[g], names)
		}
	}
	var out bytes.Buffer
	if code := execute([]string{"--help"}, &out, &out); code != 0 {
		t.Fatalf("--help: exit %d\n%s", code, out.String())
	}
	help := out.String()
	jobs, results, setup := strings.Index(help, "Jobs ("), strings.Index(help, "Results ("), strings.Index(help, "Setup (")
	if jobs < 0 || results < jobs || setup < results || strings.Contains(help, "Additional Commands") ||
		strings.Index(help[jobs:], "  run ") > strings.Index(help[jobs:], "  qualify ") {
		t.Errorf("chaosbench --help:\n%s", help)
	}
}
