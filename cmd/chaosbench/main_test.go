package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// binary is the chaosbench binary built once for the tests that run it as a user would.
var binary string

// TestMain builds the binary the tests run. The tests that judge only outcomes, exit codes and files (never a
// latency, a rate or a verdict that depends on one) call t.Parallel: they wait while the others run one at a
// time, then run together (make test gives -parallel 3), since most of their time is a paced load, a fault
// window or a wait for a process to exit, not CPU. The tests that judge latency (compare, qualify, the slow
// disk and paused-leader report, the live metrics, the split's counts) stay sequential, alone in this package.
func TestMain(m *testing.M) {
	clusters.RunMemberIfRequested()
	dir, err := os.MkdirTemp("", "chaosbench-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "chaosbench")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0") // static, as make build: it also runs FROM scratch
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "build chaosbench: %v\n%s", err, out)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// TestBadInput: every kind of bad input gets one clear line, exit code 2, and starts nothing.
func TestBadInput(t *testing.T) {
	unsetEtcdctlEnv(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	malformed := write("malformed.yaml", "workload: put\n  rate: [1000\n")
	misspelled := write("misspelled.yaml", "workload: put\nduraton: 10s\n")
	badType := write("badtype.yaml", "workload: put\nrate: fast\n")
	notMap := write("list.yaml", "- workload\n- put\n")
	existing := filepath.Join(dir, "existing")
	os.MkdirAll(existing, 0o755)
	os.WriteFile(filepath.Join(existing, results.SummaryFile), []byte("{}"), 0o644)

	inapplicable := filepath.Join(dir, "inapplicable.yaml")
	os.WriteFile(inapplicable, []byte("workload: kube\nval-size: 512\n"), 0o644)

	tests := []struct {
		name string
		args []string
		want string
	}{
		{"unknown command", []string{"frobnicate"}, "unknown command"},
		{"unknown flag", []string{"run", "--bogus"}, "unknown flag: --bogus"},
		{"bad flag value", []string{"run", "--rate", "fast"}, `invalid argument "fast"`},
		{"members", []string{"run", "--members", "4"}, "1, 3 or 5 members"},
		{"workload", []string{"run", "--workload", "putt"}, "did you mean put"},
		{"negative rate", []string{"run", "--workload", "put", "--rate", "-5"}, "--rate -5"},
		{"no end", []string{"run", "--duration", "0"}, "give --duration or --total"},
		{"conns", []string{"run", "--workload", "put", "--clients", "2", "--conns", "4"}, "more connections than --clients"},
		{"etcd flag unknown", []string{"run", "--etcd-flag", "heartbeat-intervall=100"}, "did you mean heartbeat-interval"},
		{"etcd flag value", []string{"run", "--etcd-flag", "snapshot-count=many"}, "snapshot-count=many"},
		{"etcd flag managed", []string{"run", "--etcd-flag", "data-dir=/x"}, "sets this flag itself"},
		{"cluster", []string{"run", "--cluster", "k8s"}, `--cluster "k8s"`},
		{"external without endpoints", []string{"run", "--cluster", "external"}, "needs --endpoints"},
		{"endpoints without external", []string{"run", "--endpoints", "http://127.0.0.1:2379"}, "are for --cluster external"},
		{"unreachable endpoint", []string{"run", "--cluster", "external", "--endpoints", "http://127.0.0.1:1"}, "cannot reach etcd at http://127.0.0.1:1"},
		{"endpoint without port", []string{"run", "--cluster", "external", "--endpoints", "localhost"}, `--endpoints "localhost": no port`},
		{"endpoint port", []string{"run", "--cluster", "external", "--endpoints", "127.0.0.1:99999"}, `--endpoints "127.0.0.1:99999": port "99999"`},
		{"endpoint without host", []string{"run", "--cluster", "external", "--endpoints", "http://:2379"}, `--endpoints "http://:2379": no host`},
		{"endpoint scheme", []string{"run", "--cluster", "external", "--endpoints", "ftp://127.0.0.1:2379"}, `unknown scheme "ftp"`},
		{"endpoint garbage in a list", []string{"run", "--cluster", "external", "--endpoints", "127.0.0.1:2379,,x"}, `--endpoints "127.0.0.1:2379,,x": empty endpoint in the list`},
		{"missing TLS file", []string{"run", "--cluster", "external", "--endpoints", "https://127.0.0.1:1", "--cacert", "/nonexistent.pem"}, "TLS files"},
		{"warmup", []string{"run", "--warmup", "2m", "--duration", "1m"}, "shorter than --duration"},
		{"out exists", []string{"run", "--out", existing}, "already holds a run"},
		{"progress", []string{"run", "--progress", "fancy"}, `--progress "fancy"`},
		{"missing config", []string{"run", "--config", filepath.Join(dir, "nope.yaml")}, "no such file"},
		{"malformed config", []string{"run", "--config", malformed}, "malformed.yaml"},
		{"misspelled config", []string{"run", "--config", misspelled}, `misspelled.yaml:2: unknown setting "duraton" (did you mean "duration"?)`},
		{"config type", []string{"run", "--config", badType}, "badtype.yaml:2: rate"},
		{"config not a mapping", []string{"run", "--config", notMap}, "expected a mapping"},
		{"version args", []string{"version", "extra"}, "unknown command"},
		{"check without dir", []string{"check"}, "accepts 1 arg(s)"},
		{"check not a run", []string{"check", dir}, "not a run directory"},
		{"check timeout", []string{"check", "--timeout", "-1s", dir}, "--timeout -1s"},
		{"check profile", []string{"check", "--cpu-profile", filepath.Join(dir, "no", "such", "cpu.prof"), dir}, "--cpu-profile: open"},
		{"run profile", []string{"run", "--cpu-profile", filepath.Join(dir, "no", "such", "cpu.prof")}, "--cpu-profile: open"},
		{"check-timeout", []string{"run", "--check-timeout", "-1s"}, "--check-timeout -1s"},
		{"known-issues", []string{"run", "--known-issues", "ignore"}, `--known-issues "ignore": expected report or fail`},
		{"workload typo", []string{"run", "--workload", "kub"}, "did you mean kube"},
		{"kube total", []string{"run", "--total", "100"}, "the kube workload runs for --duration"},
		{"kube preset", []string{"run", "--preset", "huge"}, `--preset "huge"`},
		{"kube actor", []string{"run", "--skip-actors", "churm"}, "did you mean churn"},
		{"kube sizes", []string{"run", "--object-sizes", "pods=3m"}, "1.5 MiB request limit"},
		{"micro flag on kube", []string{"run", "--val-size", "100"}, "--val-size does not apply to the kube workload; its own flags are --actors"},
		{"rate on kube", []string{"run", "--workload", "kube", "--rate", "500"}, "--rate does not apply to the kube workload"},
		{"kube flags on put", []string{"run", "--workload", "put", "--nodes", "5", "--churn", "2"}, "--nodes, --churn do not apply to the put workload; its own flags are --clients"},
		{"txn flag on range", []string{"run", "--workload", "range", "--txn-ops", "3"}, "--txn-ops does not apply to the range workload"},
		{"watch flag on put", []string{"run", "--workload", "put", "--prev-kv"}, "--prev-kv does not apply to the put workload"},
		{"config sets an inapplicable flag", []string{"run", "--config", inapplicable}, "--val-size does not apply to the kube workload"},
		{"metrics addr", []string{"run", "--metrics-addr", "9464"}, `--metrics-addr "9464": host:port`},
		{"remote write URL", []string{"run", "--prometheus-remote-write", "prometheus:9090"}, "--prometheus-remote-write: an http:// or https:// URL"},
		{"remote write credentials in URL", []string{"run", "--prometheus-remote-write", "http://u:p@127.0.0.1:9090/api/v1/write"}, "no credentials in the URL"},
		{"workers out of range", []string{"run", "--workers", "0"}, "--workers 0: between 1 and 64"},
		{"worker of an embedded cluster", []string{"run", "--workers", "3", "--worker", "1", "--clock-ref", "http://127.0.0.1:7400"}, "give --cluster external"},
		{"worker without a reference", []string{"run", "--workers", "3", "--worker", "1", "--cluster", "external", "--endpoints", "127.0.0.1:2379"}, "give --clock-ref (or --start-at)"},
		{"more workers than apiservers", []string{"run", "--workers", "4"}, "--apiservers 3 gives at most 3 workers"},
		{"clock reference without a worker", []string{"run", "--clock-ref", "http://127.0.0.1:7400"}, "are for a worker"},
		{"remote write user without password", []string{"run", "--prometheus-remote-write", "http://127.0.0.1:9090/api/v1/write", "--prometheus-remote-write-user", "u"}, "go together"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(dir, "out-"+strings.ReplaceAll(tt.name, " ", "-"))
			args := tt.args
			if args[0] == "run" && !hasFlag(args, "--out") {
				args = append(append([]string{}, args...), "--out", out)
			}
			var stdout, stderr bytes.Buffer
			code := execute(args, &stdout, &stderr)
			if code != outcome.ExitUsage {
				t.Fatalf("exit code %d, want %d; stderr: %s", code, outcome.ExitUsage, stderr.String())
			}
			lines := strings.Split(strings.TrimRight(stderr.String(), "\n"), "\n")
			if len(lines) != 1 || !strings.Contains(lines[0], tt.want) {
				t.Fatalf("stderr %q, want one line containing %q", stderr.String(), tt.want)
			}
			if stdout.Len() != 0 {
				t.Fatalf("something was started or printed: %q", stdout.String())
			}
			if _, err := os.Stat(out); err == nil {
				t.Fatalf("run directory %s was created", out)
			}
			if kids := children(os.Getpid()); len(kids) > 0 {
				t.Fatalf("processes left running: %v", kids)
			}
		})
	}
}

func hasFlag(args []string, flag string) bool {
	for _, a := range args {
		if a == flag || strings.HasPrefix(a, flag+"=") {
			return true
		}
	}
	return false
}

// TestRunPut runs the real binary with the put micro workload on 1 and 5 members (TestRunKube runs the
// default workload on 3).
func TestRunPut(t *testing.T) {
	for _, members := range []string{"1", "5"} {
		t.Run(members+" members", func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "run")
			args := []string{"run", "--workload", "put", "--duration", "4s", "--members", members, "--out", out}
			if members == "5" {
				args = append(args, "--check-during-load", "--read-during-load=false")
			}
			cmd := exec.Command(binary, args...)
			output, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("chaosbench run: %v\n%s", err, output)
			}
			s, err := results.ReadSummary(out)
			if err != nil {
				t.Fatal(err)
			}
			put := s.Operations["put"]
			if put == nil || put.Count < 3600 || put.Throughput < 900 || put.Response.P99 <= 0 || put.Response.P50 <= 0 || put.Service.P999 <= 0 {
				t.Fatalf("summary put: %+v", put)
			}
			if s.Incomplete || s.Seed == 0 || s.Cluster.Members != atoi(members) || s.Versions.EtcdServer == "" {
				t.Fatalf("summary: incomplete %v seed %d members %d server %q", s.Incomplete, s.Seed, s.Cluster.Members, s.Versions.EtcdServer)
			}
			for _, f := range []string{"latency.hlog", "hgrm/put.hgrm", "hgrm/put.service.hgrm", "history.bin", "timeseries.jsonl", "members/m1.log"} {
				if _, err := os.Stat(filepath.Join(out, f)); err != nil {
					t.Errorf("run directory lacks %s", f)
				}
			}
			if top, _ := filepath.Glob(filepath.Join(out, "*.hgrm")); len(top) > 0 {
				t.Errorf("percentile files at the top of the run directory: %v", top)
			}
			if !strings.Contains(string(output), fmt.Sprintf("seed %d", s.Seed)) {
				t.Errorf("the seed was not printed:\n%s", output)
			}
			if left := processesMentioning(out); len(left) > 0 {
				t.Fatalf("member processes remain after the run: %v", left)
			}
			if entries, _ := filepath.Glob(filepath.Join(out, "members", "*.etcd")); len(entries) > 0 {
				t.Errorf("data directories not removed after a successful run: %v", entries)
			}
			// The run checked its own history, compared the members when there are several, and printed the
			// verdicts. The put workload neither watches nor reads serializably: those checks have nothing to
			// check, and say so.
			want := map[string]string{"linearizability": results.VerdictOK, "watch": results.VerdictNothing,
				"serializable-reads": results.VerdictNothing}
			if members != "1" {
				want["members-agree"] = results.VerdictOK
			}
			requireChecks(t, s.Checks, want)
			// It says how long the verdict took after the load and the checks' share, and with
			// --check-during-load what the checks during the load did (a 4-second history is too short for
			// one: they start at 256 KB), and left no copy of the history behind.
			if s.CheckSeconds <= 0 || s.CheckAfterLoadSeconds < s.CheckSeconds || (s.CheckDuringLoad != nil) != (members == "5") {
				t.Errorf("check timing: after the load %.2fs, checks %.2fs, during the load %+v", s.CheckAfterLoadSeconds, s.CheckSeconds, s.CheckDuringLoad)
			}
			// By default the operations were read while the load wrote them; --read-during-load=false reads
			// them after it.
			if s.CheckReadDuringLoad != (members == "1") {
				t.Errorf("the check took the operations read during the load: %v, want %v", s.CheckReadDuringLoad, members == "1")
			}
			if left, _ := filepath.Glob(filepath.Join(out, ".check-during-load-*")); len(left) > 0 {
				t.Errorf("left behind: %v", left)
			}
			if !strings.Contains(string(output), "linearizability      OK") || !strings.Contains(string(output), "watch                NOTHING TO CHECK") {
				t.Errorf("verdicts not printed:\n%s", output)
			}
		})
	}
}

// requireChecks checks a run's consistency verdicts, one per check named in want, and no other check.
func requireChecks(t *testing.T, checks []results.Check, want map[string]string) {
	t.Helper()
	if len(checks) != len(want) {
		t.Errorf("checks %+v, want %v", checks, want)
	}
	for _, c := range checks {
		if w := want[c.Name]; c.Verdict != w {
			t.Errorf("check %s: %s, want %s: %s", c.Name, c.Verdict, w, c.Detail)
		}
	}
}

// TestCheckCommand re-checks recorded histories offline: a clean one exits 0, one with an anomaly exits 4
// and names it; both print a verdict per check.
func TestCheckCommand(t *testing.T) {
	for _, tc := range []struct {
		fixture string
		code    int
		want    string
	}{
		{"pass/faults", outcome.ExitOK, "linearizability      OK"},
		{"fail/torn-txn", outcome.ExitViolation, "linearizability      VIOLATION"},
		{"fail/dropped-event", outcome.ExitViolation, "watch                VIOLATION"},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.CopyFS(dir, os.DirFS(filepath.Join("..", "..", "linearizability", "testdata", tc.fixture))); err != nil {
				t.Fatal(err)
			}
			var stdout, stderr bytes.Buffer
			profile := filepath.Join(t.TempDir(), "cpu.prof")
			if code := execute([]string{"check", "--cpu-profile", profile, dir}, &stdout, &stderr); code != tc.code {
				t.Fatalf("exit code %d, want %d\n%s%s", code, tc.code, stdout.String(), stderr.String())
			}
			if !strings.Contains(stdout.String(), tc.want) || !strings.Contains(stdout.String(), "serializable-reads") {
				t.Fatalf("output lacks %q:\n%s", tc.want, stdout.String())
			}
			if _, err := os.Stat(filepath.Join(dir, "check.json")); err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Stat(profile); err != nil || fi.Size() == 0 {
				t.Fatalf("no CPU profile written: %v", err)
			}
			if tc.code == outcome.ExitViolation && strings.Contains(tc.want, "linearizability") {
				if _, err := os.Stat(filepath.Join(dir, "linearizability.html")); err != nil {
					t.Fatalf("no visualization: %v", err)
				}
			}
		})
	}
}

// TestRunWithoutHistory: with --history=false the run says it skipped the checks.
func TestRunWithoutHistory(t *testing.T) {
	t.Parallel() // judges outcomes and files, not latency (see TestMain)
	out := filepath.Join(t.TempDir(), "run")
	cmd := exec.Command(binary, "run", "--workload", "put", "--duration", "2s", "--members", "1", "--history=false", "--out", out)
	output, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("chaosbench run: %v\n%s", err, output)
	}
	if !strings.Contains(string(output), "consistency checks skipped: no history was recorded (--history=false)") {
		t.Fatalf("no word about the skipped checks:\n%s", output)
	}
	// Without a history, availability is measured from the time series, whose rows say which operations write.
	md, err := os.ReadFile(filepath.Join(out, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(md), "longest time without a successful write") {
		t.Errorf("report.md does not measure availability from the time series:\n%s", md)
	}
}

func atoi(s string) int {
	var n int
	fmt.Sscan(s, &n)
	return n
}

// TestKill9LeavesNoMember: SIGKILL of chaosbench mid-run takes its members with it.
func TestKill9LeavesNoMember(t *testing.T) {
	t.Parallel() // judges outcomes and files, not latency (see TestMain)
	out := filepath.Join(t.TempDir(), "run")
	cmd := exec.Command(binary, "run", "--workload", "put", "--duration", "60s", "--out", out, "--progress", "none")
	waitForLine(t, cmd, "cluster ready")
	time.Sleep(time.Second) // well into the load
	members := filepath.Join(out, "members") + "/"
	if n := len(processesMentioning(members)); n != 3 {
		t.Fatalf("%d member processes running, want 3", n)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	waitUntil(t, 5*time.Second, func() bool { return len(processesMentioning(members)) == 0 })
}

// waitForLine starts cmd and returns once its standard output has printed a line starting with prefix.
// readyWithin bounds how long waitForLine waits: these tests judge what a run leaves behind, not how fast it
// starts, and a docker cluster on CI's two loaded cores (three parallel tests building and starting clusters)
// once took more than a minute.
const readyWithin = 3 * time.Minute

func waitForLine(t *testing.T, cmd *exec.Cmd, prefix string) {
	t.Helper()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	seen := make(chan struct{})
	var once sync.Once
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), prefix) {
				once.Do(func() { close(seen) })
			}
		}
	}()
	select {
	case <-seen:
	case <-time.After(readyWithin):
		t.Fatalf("no line starting with %q within %s", prefix, readyWithin)
	}
}

// TestInterrupt: SIGINT stops the load, writes partial results marked incomplete, stops the cluster and
// exits with 130 within 10 s.
func TestInterrupt(t *testing.T) {
	t.Parallel() // judges outcomes and files, not latency (see TestMain)
	out := filepath.Join(t.TempDir(), "run")
	cmd := exec.Command(binary, "run", "--workload", "put", "--duration", "60s", "--out", out, "--progress", "lines")
	waitForLine(t, cmd, "elapsed") // the first progress line: the load is running
	sent := time.Now()
	cmd.Process.Signal(os.Interrupt)
	err := cmd.Wait()
	took := time.Since(sent)
	if code := cmd.ProcessState.ExitCode(); code != outcome.ExitInterrupted {
		t.Fatalf("exit code %d (%v), want %d", code, err, outcome.ExitInterrupted)
	}
	if took > 10*time.Second {
		t.Fatalf("exiting took %v after SIGINT", took)
	}
	s, err := results.ReadSummary(out)
	if err != nil {
		t.Fatal(err)
	}
	if !s.Incomplete || s.Operations["put"] == nil || s.Operations["put"].Count == 0 {
		t.Fatalf("partial summary: incomplete=%v ops=%v", s.Incomplete, s.Operations)
	}
	if left := processesMentioning(out); len(left) > 0 {
		t.Fatalf("member processes remain: %v", left)
	}
}

func waitUntil(t *testing.T, d time.Duration, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("condition not met within %v", d)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// processesMentioning returns the pids of live processes whose command line contains s.
func processesMentioning(s string) []string {
	var pids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(s)) {
			continue
		}
		if stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat")); err == nil && bytes.Contains(stat, []byte(") Z ")) {
			continue // a zombie is already dead
		}
		pids = append(pids, e.Name())
	}
	return pids
}

// children returns the pids of live child processes of pid.
func children(pid int) []string {
	var kids []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) > 1 && fields[1] == fmt.Sprint(pid) && fields[0] != "Z" {
			kids = append(kids, e.Name())
		}
	}
	return kids
}
