package ci

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// stub writes an executable shell script named name into dir.
func stub(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

// runCI runs a copy of .ci/run in a tree of its own, with only the stubs of bin (and dirname) on its PATH:
// a stand-in for go, apt-get, id, make, ci/etcd-tool.sh and the Debian tools, each as the case asks. It
// returns the output, the exit code and what go run and make were called with, in order (one line per call:
// its arguments, for make the CHAOSBENCH_ variables it saw, and CGO_ENABLED).
func runCI(t *testing.T, setup func(bin, tree string)) (string, int, string) {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Fatalf("bash not found: %v", err)
	}
	dirname, err := exec.LookPath("dirname")
	if err != nil {
		t.Fatalf("dirname not found: %v", err)
	}
	tree, bin := t.TempDir(), t.TempDir()
	for _, d := range []string{".ci", "ci"} {
		if err := os.Mkdir(filepath.Join(tree, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	script, err := os.ReadFile("../.ci/run")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(tree, ".ci", "run"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dirname, filepath.Join(bin, "dirname")); err != nil {
		t.Fatal(err)
	}
	calls := filepath.Join(tree, "calls")
	stub(t, bin, "go", `case "$1" in version) echo "go version stub";; run) echo "go $* CGO_ENABLED=${CGO_ENABLED:-}" >> "`+calls+`";; esac`)
	stub(t, bin, "id", "echo 0")
	stub(t, bin, "make", `echo "$* CHAOSBENCH_REQUIRE=${CHAOSBENCH_REQUIRE:-} CHAOSBENCH_ETCDCTL=${CHAOSBENCH_ETCDCTL:-} CGO_ENABLED=${CGO_ENABLED:-}" >> "`+calls+`"`)
	stub(t, filepath.Join(tree, "ci"), "etcd-tool.sh", `echo /cache/etcdctl-v3.6.8`)
	setup(bin, tree)
	cmd := exec.Command(bash, filepath.Join(tree, ".ci", "run"))
	cmd.Env = []string{"PATH=" + bin, "HOME=" + t.TempDir(), "CNI_PLUGIN_DIR=" + filepath.Join(tree, "cni")}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	made, _ := os.ReadFile(calls)
	return out.String(), code, string(made)
}

// TestCIRunRequiresEveryTool: .ci/run provides every tool and then runs make test, make test-long (the long
// tests make test skips) and make nightly-smoke with CHAOSBENCH_REQUIRE=all, so that a promise test that
// finds its tool missing fails there; an install or a build that fails stops it at once, naming what
// failed, before make test could pass by skipping.
func TestCIRunRequiresEveryTool(t *testing.T) {
	debian := []string{"fio", "chromium", "prometheus", "strace", "python3", "containerd", "runc", "debootstrap"}
	installed := func(bin, tree string) {
		for _, tool := range debian {
			stub(t, bin, tool, "exit 0")
		}
		if err := os.Mkdir(filepath.Join(tree, "cni"), 0o755); err != nil {
			t.Fatal(err)
		}
		stub(t, filepath.Join(tree, "cni"), "bridge", "exit 0")
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, bin, tree string)
		pass  bool
		says  []string
	}{
		{"everything there", func(t *testing.T, bin, tree string) { installed(bin, tree) }, true,
			[]string{"ci: Debian packages (none missing) in", "ci: etcdctl in", "ci: the Kubernetes control plane in", "ci: the etcd releases in",
				"ci: make test in", "ci: make test-long in", "ci: make nightly-smoke in"}},
		{"installed by apt-get", func(t *testing.T, bin, tree string) {
			chmod, err := exec.LookPath("chmod")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(chmod, filepath.Join(bin, "chmod")); err != nil {
				t.Fatal(err)
			}
			if err := os.Mkdir(filepath.Join(tree, "cni"), 0o755); err != nil {
				t.Fatal(err)
			}
			stub(t, bin, "apt-get", `for a; do case $a in -*|update|install) ;; containernetworking-plugins) printf '#!/bin/sh\n' > "`+tree+`/cni/bridge"; chmod +x "`+tree+`/cni/bridge";; *) printf '#!/bin/sh\n' > "`+bin+`/$a"; chmod +x "`+bin+`/$a";; esac; done`)
		}, true, []string{"ci: Debian packages (fio chromium prometheus strace python3 containerd runc debootstrap containernetworking-plugins) in"}},
		{"installed, yet not on PATH", func(t *testing.T, bin, tree string) { stub(t, bin, "apt-get", "exit 0") }, false,
			[]string{"FAIL: apt-get installed the package fio, but there is no fio on PATH"}},
		{"apt-get fails", func(t *testing.T, bin, tree string) { stub(t, bin, "apt-get", "exit 100") }, false,
			[]string{"FAIL: could not install fio chromium prometheus strace python3 containerd runc debootstrap containernetworking-plugins"}},
		{"no apt-get", func(t *testing.T, bin, tree string) {}, false, []string{"FAIL: fio chromium prometheus strace python3 containerd runc debootstrap containernetworking-plugins missing"}},
		{"not root", func(t *testing.T, bin, tree string) {
			stub(t, bin, "apt-get", "exit 0")
			stub(t, bin, "id", "echo 1000")
		}, false, []string{"FAIL: fio chromium prometheus strace python3 containerd runc debootstrap containernetworking-plugins missing, and apt-get cannot install them"}},
		{"etcdctl does not build", func(t *testing.T, bin, tree string) {
			installed(bin, tree)
			stub(t, filepath.Join(tree, "ci"), "etcd-tool.sh", "exit 1")
		}, false, []string{"FAIL: could not build etcdctl"}},
		{"the control plane does not build", func(t *testing.T, bin, tree string) {
			installed(bin, tree)
			stub(t, bin, "go", `case "$1" in version) echo stub;; run) exit 1;; esac`)
		}, false, []string{"FAIL: could not build the Kubernetes control plane"}},
		{"the failpoint build of etcd fails", func(t *testing.T, bin, tree string) {
			installed(bin, tree)
			stub(t, bin, "go", `case "$*" in version) echo stub;; *--failpoints*) exit 1;; esac`)
		}, false, []string{"FAIL: could not build etcd v3.6.16,v3.5.4,v3.5.5,v3.5.12 --failpoints"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code, made := runCI(t, func(bin, tree string) { tc.setup(t, bin, tree) })
			if (code == 0) != tc.pass {
				t.Errorf("exit code %d, want pass %v:\n%s", code, tc.pass, out)
			}
			for _, s := range tc.says {
				if !strings.Contains(out, s) {
					t.Errorf("the output does not say %q:\n%s", s, out)
				}
			}
			if !tc.pass {
				if made != "" {
					t.Errorf("a step ran after a failed install or build: %s", made)
				}
				return
			}
			// Static builds throughout (CGO_ENABLED=0): the control plane step's build of the dependencies is the
			// tests' and the smoke suite's.
			want := "go run ./cmd/chaosbench image kube CGO_ENABLED=0\n" +
				"go run ./cmd/chaosbench image build --binary-only --etcd-version v3.5.35,v3.6.16 CGO_ENABLED=0\n" +
				"go run ./cmd/chaosbench image build --binary-only --etcd-version v3.6.16,v3.5.4,v3.5.5,v3.5.12 --failpoints CGO_ENABLED=0\n"
			for _, target := range []string{"test", "test-long", "nightly-smoke"} {
				want += target + " CHAOSBENCH_REQUIRE=all CHAOSBENCH_ETCDCTL=/cache/etcdctl-v3.6.8 CGO_ENABLED=0\n"
			}
			if made != want {
				t.Errorf("go run and make were called so:\n%s\nwant:\n%s", made, want)
			}
		})
	}
}
