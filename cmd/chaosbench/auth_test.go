package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	chaosbench "github.com/etcd-chaosbench/chaosbench"
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
	t.Parallel() // judges outcomes, checks and files, not latency (see TestMain)
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
		noPasswordUnder(t, out, a.Admin.Password)
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

	// qualify logs in as run does: its steps' load and checks run as --user, the password read from its
	// file, and it never reaches the qualification's files; a refused password is one line and exit 2.
	t.Run("qualify --user", func(t *testing.T) {
		pw := filepath.Join(t.TempDir(), "pw")
		if err := os.WriteFile(pw, []byte(a.Admin.Password+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		out := filepath.Join(t.TempDir(), "qualify")
		code, output := runBinary(t, "qualify", "--cluster", "external", "--endpoints", ep, "--user", a.Admin.User,
			"--password-file", pw, "--class", "small", "--step-duration", "4s", "--warmup", "1s", "--disk-probe=false",
			"--progress", "none", "--out", out)
		var q chaosbench.Qualification
		data, err := os.ReadFile(filepath.Join(out, chaosbench.QualificationFile))
		if err == nil {
			err = json.Unmarshal(data, &q)
		}
		if err != nil {
			t.Fatalf("exit %d, no qualification: %v\n%s", code, err, output)
		}
		// The step's run decided (passed, or failed a limit on a busy machine), which needs the load and the
		// checks to have logged in: refused credentials would leave it a harness error. (The step itself may
		// still be undecided on a machine too busy to keep the schedule; that is the generator's, not auth's.)
		if len(q.Steps) != 1 || (q.Steps[0].RunOutcome != outcome.OK && q.Steps[0].RunOutcome != outcome.ThresholdFailed) {
			t.Fatalf("exit %d: steps %+v: want small's step run decided\n%s", code, q.Steps, output)
		}
		st, err := results.ReadSummary(filepath.Join(out, q.Steps[0].Dir))
		if err != nil {
			t.Fatal(err)
		}
		if i := slices.IndexFunc(st.Checks, func(c results.Check) bool { return c.Name == lin.CheckLinearizability }); i < 0 || st.Checks[i].Verdict != results.VerdictOK {
			t.Errorf("step checks %+v: want linearizability ok", st.Checks)
		}
		noPasswordUnder(t, out, a.Admin.Password)
		refused := filepath.Join(t.TempDir(), "refused")
		code, output = runBinary(t, "qualify", "--cluster", "external", "--endpoints", ep, "--user", a.Admin.User+":wrong",
			"--class", "small", "--out", refused)
		if code != outcome.ExitUsage || strings.Count(strings.TrimSpace(output), "\n") != 0 || !strings.Contains(output, "refused the credentials") {
			t.Errorf("a refused password: exit %d, %q: want one line and exit 2", code, output)
		}
		if _, err := os.Stat(refused); err == nil {
			t.Errorf("a refused password created %s", refused)
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
			out := filepath.Join(t.TempDir(), "run")
			var stdout, stderr bytes.Buffer
			cmd := exec.Command(binary, append([]string{"run", "--cluster", "external", "--endpoints", ep, "--workload", "put", "--out", out}, tt.args...)...)
			cmd.Env, cmd.Stdout, cmd.Stderr = environWithout(), &stdout, &stderr // etcdctl's variables would stand in for --user
			cmd.Run()
			code := cmd.ProcessState.ExitCode()
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

// noPasswordUnder fails t if a file under dir holds password.
func noPasswordUnder(t *testing.T, dir, password string) {
	t.Helper()
	if err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err == nil && bytes.Contains(b, []byte(password)) {
			t.Errorf("%s holds the password", p)
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
