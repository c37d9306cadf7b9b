// Package testenv decides what a test does when its machine lacks a tool that `go test` cannot provide:
// FUSE, strace, a Docker engine, fio, a browser, a Prometheus, or builds of etcdctl, of a failpoint etcd and
// of the Kubernetes control plane. The tests that need them carry the promises the README makes (the
// checker catches a real anomaly under every fault, a slow disk is slow, qualify agrees with fio and with
// `etcdctl check perf`, the pages render, ...). On a developer's machine such a test skips, saying why.
// On CI, which installs or builds every one of them (.ci/run), it fails: a green CI then proves the
// promises were checked, not skipped because an install went wrong.
//
// CI says which tools it provides in CHAOSBENCH_REQUIRE: "all", or a comma-separated list of tool names
// (a machine that has only some of them, such as a laptop with FUSE and Docker but no browser, can require
// what it has). A name that is not a tool is an error, never ignored: a misspelt tool would otherwise be
// silently not required.
package testenv

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Env is the variable that names the required tools.
const Env = "CHAOSBENCH_REQUIRE"

// All, as Env's value, requires every tool.
const All = "all"

// Tool is something a test needs of its machine.
type Tool string

// The tools, each with what provides it on CI (.ci/run).
const (
	// FUSE: /dev/fuse, and root or fusermount, for slowfs (slow disks, unsynced writes lost at a kill). The
	// CI machine has it.
	FUSE Tool = "fuse"
	// Strace: strace, which slows a member's fdatasync calls where there is no FUSE (Debian's strace).
	Strace Tool = "strace"
	// Docker: a Docker engine that answers, for docker clusters. The CI machine runs one.
	Docker Tool = "docker"
	// Fio: fio, which the disk probe is compared with (Debian's fio).
	Fio Tool = "fio"
	// Chromium: a headless Chromium, which opens the report pages (Debian's chromium).
	Chromium Tool = "chromium"
	// Prometheus: a real Prometheus, which scrapes a run's live metrics (Debian's prometheus).
	Prometheus Tool = "prometheus"
	// Etcdctl: etcdctl, named by CHAOSBENCH_ETCDCTL, which qualify --etcdctl-compat is compared with
	// (built from the module proxy by ci/etcd-tool.sh etcdctl).
	Etcdctl Tool = "etcdctl"
	// Failpoints: etcd v3.6.16 built with gofail's failpoints, from the module proxy (the tests build it on
	// first use and cache it).
	Failpoints Tool = "failpoints"
	// Kube: kube-apiserver, kube-controller-manager, kube-scheduler and KWOK in the build cache (built from the
	// module proxy by `chaosbench image kube`).
	Kube Tool = "kube"
	// KubeNode: what a one-node Kubernetes needs of its machine (chaosbench kube local up): root, containerd,
	// runc and the CNI plugins (Debian's containerd, runc, containernetworking-plugins), cgroups, and the
	// kubelet, kubectl and CoreDNS in the build cache (built by `chaosbench image kube`).
	KubeNode Tool = "kubenode"
	// Debootstrap: debootstrap and Debian's archive, which make a Debian root file system: the stand-in for the
	// Prow job's golang image, which cannot be pulled here (Debian's debootstrap).
	Debootstrap Tool = "debootstrap"
)

// Tools returns every tool.
func Tools() []Tool {
	return []Tool{FUSE, Strace, Docker, Fio, Chromium, Prometheus, Etcdctl, Failpoints, Kube, KubeNode, Debootstrap}
}

// Required returns the tools a value of Env names: none for "", every tool for "all". A name that is not a
// tool is an error.
func Required(value string) ([]Tool, error) {
	if strings.TrimSpace(value) == All {
		return Tools(), nil
	}
	var out []Tool
	for _, name := range strings.Split(value, ",") {
		name = strings.TrimSpace(name)
		if name == "" {
			continue
		}
		if !slices.Contains(Tools(), Tool(name)) {
			return nil, fmt.Errorf("%s=%s: %q is not a tool (the tools: %s, or %s)", Env, value, name, names(), All)
		}
		out = append(out, Tool(name))
	}
	return out, nil
}

func names() string {
	var s []string
	for _, t := range Tools() {
		s = append(s, string(t))
	}
	return strings.Join(s, ", ")
}

// Missing is what a test calls when it finds tool missing, in place of t.Skipf, with the same format and
// arguments (what is missing and how to get it): the test skips with that reason, or fails with it when
// Env requires the tool (or names something that is not a tool).
func Missing(t testing.TB, tool Tool, format string, args ...any) {
	t.Helper()
	why := fmt.Sprintf(format, args...)
	value := os.Getenv(Env)
	required, err := Required(value)
	if err != nil {
		t.Fatalf("%v; this test needs %s: %s", err, tool, why)
	}
	if slices.Contains(required, tool) {
		t.Fatalf("%s is required here (%s=%s), and missing: %s", tool, Env, value, why)
	}
	t.Skip(why)
}

// LongEnv is the variable that lets the long tests run: `make test-long` sets it to 1; `make test` leaves it
// unset, and the long tests skip there, saying that they run in make test-long. CI runs both targets, so
// a long test still proves its promise on every CI run; it only stays out of the target developers run
// after each change.
const LongEnv = "CHAOSBENCH_LONG"

// LongPattern matches the name of every long test (TestLong, then a capital letter: TestLongestGap is not
// one): `make test-long` selects them by it (go test -run '^TestLong[A-Z]'), so a long test named
// otherwise would run in neither target.
const LongPattern = "^TestLong[A-Z]"

var longName = regexp.MustCompile(LongPattern)

// IsLongName reports whether a test of that name (a top-level test, or a subtest of one) is selected by
// make test-long.
func IsLongName(name string) bool { return longName.MatchString(name) }

// Long is what a long test calls first: a soak-like run, a version matrix, a downgrade across releases, a
// failpoint build, anything that would make `make test` slow. why says what makes it long. Unless LongEnv
// is 1 the test skips, saying that it runs in make test-long; a LongEnv of another value, or a test whose
// name LongPattern does not match (make test-long would never select it), fails.
func Long(t testing.TB, why string) {
	t.Helper()
	if !IsLongName(t.Name()) {
		t.Fatalf("%s calls testenv.Long, so its name must match %s (TestLongSomething): make test-long selects the long tests by it", t.Name(), LongPattern)
	}
	switch value := os.Getenv(LongEnv); value {
	case "1":
		return
	case "":
		t.Skipf("long test (%s): runs in make test-long (%s=1)", why, LongEnv)
	default:
		t.Fatalf("%s=%s: expected 1 (run the long tests) or unset (skip them)", LongEnv, value)
	}
}
