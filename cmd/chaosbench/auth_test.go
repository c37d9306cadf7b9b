package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	lin "github.com/etcd-chaosbench/chaosbench/linearizability"
	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// TestRunAuth runs the load and the consistency checks on clusters with authentication on: one
// chaosbench starts with --auth, its maintenance faults (defrag, compact, snapshot, which need root) in
// the schedule, and an external one logged in to with --user, whose password must not be written into
// the results. Refused or missing credentials are one line and exit 2, nothing started.
func TestRunAuth(t *testing.T) {
	t.Run("--auth", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "run")
		code, output := runBinary(t, "run", "--auth", "--workload", "txn-mixed", "--duration", "8s", "--rate", "150",
			"--clients", "8", "--conns", "2", "--key-space-size", "50", "--progress", "none", "--seed", "7",
			"--faults", "defrag@2s,compact@3s,snapshot:m1@4s", "--out", out)
		if code != outcome.ExitOK {
			t.Fatalf("exit %d:\n%s", code, output)
		}
		if !strings.Contains(output, "auth enabled: the load runs as "+clusters.LoadUser) {
			t.Errorf("the output does not say auth is on:\n%s", output)
		}
		s, err := results.ReadSummary(out)
		if err != nil {
			t.Fatal(err)
		}
		requireChecked(t, s)
		for _, w := range s.Faults {
			if w.Outcome != "recovered" {
				t.Errorf("fault %s: %s", w.Spec, w.Outcome)
			}
		}
		if len(s.Faults) != 3 {
			t.Errorf("fault windows %+v, want defrag, compact and snapshot", s.Faults)
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := clusters.StartEmbedded(ctx, clusters.EmbedOptions{Members: 1, Dir: t.TempDir()})
	if err != nil {
		t.Fatalf("start a member: %v", err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	a, err := clusters.EnableAuth(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	ep := c.Endpoints()[0]

	t.Run("--user name:password", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "run")
		user := a.Admin.User + ":" + a.Admin.Password
		code, output := runBinary(t, "run", "--cluster", "external", "--endpoints", ep, "--user", user,
			"--workload", "txn-mixed", "--duration", "4s", "--rate", "150", "--clients", "4", "--conns", "1",
			"--key-space-size", "50", "--faults", "none", "--progress", "none", "--out", out)
		if code != outcome.ExitOK {
			t.Fatalf("exit %d:\n%s", code, output)
		}
		s, err := results.ReadSummary(out)
		if err != nil {
			t.Fatal(err)
		}
		requireChecked(t, s)
		if !slices.Contains(s.Command, a.Admin.User+":REDACTED") {
			t.Errorf("summary command %q: want --user's password redacted", s.Command)
		}
		if err := filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := os.ReadFile(p)
			if err == nil && bytes.Contains(b, []byte(a.Admin.Password)) {
				t.Errorf("%s holds the password", p)
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("--user with --password-file", func(t *testing.T) {
		pw := filepath.Join(t.TempDir(), "pw")
		if err := os.WriteFile(pw, []byte(a.Load.Password+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		code, output := runBinary(t, "run", "--cluster", "external", "--endpoints", ep, "--user", a.Load.User,
			"--password-file", pw, "--workload", "put", "--duration", "2s", "--rate", "100", "--clients", "2",
			"--conns", "1", "--faults", "none", "--progress", "none", "--out", filepath.Join(t.TempDir(), "run"))
		if code != outcome.ExitOK {
			t.Fatalf("exit %d:\n%s", code, output)
		}
	})

	for _, tt := range []struct {
		name string
		args []string
		want string
	}{
		{"wrong password", []string{"--user", a.Load.User + ":wrong"}, "--user " + a.Load.User + ": etcd at " + ep + " refused the credentials"},
		{"no password", []string{"--user", "root"}, "--user root: no password"},
		{"no user", nil, "has authentication enabled: give --user"},
		{"password file without user", []string{"--password-file", "/etc/hostname"}, "--password-file is the password of --user"},
		{"password file missing", []string{"--user", "root", "--password-file", "/nonexistent/pw"}, "--password-file: open /nonexistent/pw"},
		{"password twice", []string{"--user", "root:x", "--password-file", "/etc/hostname"}, "--user root: a password in --user and --password-file"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			unsetEtcdctlEnv(t)
			out := filepath.Join(t.TempDir(), "run")
			var stdout, stderr bytes.Buffer
			args := append([]string{"run", "--cluster", "external", "--endpoints", ep, "--workload", "put", "--out", out}, tt.args...)
			code := execute(args, &stdout, &stderr)
			if code != outcome.ExitUsage || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), tt.want) {
				t.Fatalf("exit %d, stderr %q; want %d and one line containing %q", code, stderr.String(), outcome.ExitUsage, tt.want)
			}
			if _, err := os.Stat(out); err == nil || stdout.Len() != 0 {
				t.Fatalf("something was started: %q", stdout.String())
			}
		})
	}
}

// requireChecked fails t unless the run passed and its linearizability check ran and passed.
func requireChecked(t *testing.T, s *results.Summary) {
	t.Helper()
	if s.Outcome != outcome.OK {
		t.Fatalf("outcome %s: %v", s.Outcome, s.Reasons)
	}
	i := slices.IndexFunc(s.Checks, func(c results.Check) bool { return c.Name == lin.CheckLinearizability })
	if i < 0 || s.Checks[i].Verdict != results.VerdictOK {
		t.Fatalf("checks %+v: want linearizability ok", s.Checks)
	}
	if ops := s.Operations["txn-write"]; ops != nil && ops.Errors > 0 {
		t.Errorf("txn-write errors %d of %d", ops.Errors, ops.Count)
	}
}
