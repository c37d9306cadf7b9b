package kubenode

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/internal/testenv"
)

// TestDown: what a killed node leaves (a process naming its directory, one in its cgroups, a tmpfs and a
// bind mount under its directory, its bridge, its cgroups, a kernel setting the kubelet changed) is all
// gone after Down, and Leftovers, which the end-to-end test trusts, sees each of them before.
func TestDown(t *testing.T) {
	if err := CheckHost(); err != nil {
		testenv.Missing(t, testenv.KubeNode, "skipping: %v", err)
	}
	dir := filepath.Join(t.TempDir(), "node")
	if err := os.MkdirAll(filepath.Join(dir, "kubelet", "pods", "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	id := randomID()
	st := state{Name: "test", Bridge: "cbtest" + id[:6], CgroupRoot: "/chaosbench-node-test-" + id,
		Sysctls: map[string]string{"kernel/panic_on_oops": "0"}}
	old, err := os.ReadFile("/proc/sys/kernel/panic_on_oops")
	if err != nil {
		t.Fatal(err)
	}
	st.Sysctls["kernel/panic_on_oops"] = strings.TrimSpace(string(old))
	t.Cleanup(func() { os.WriteFile("/proc/sys/kernel/panic_on_oops", old, 0o644) })
	if err := writeJSON(filepath.Join(dir, "state.json"), st); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Down(dir) }) // when the test fails before its own Down
	// Leftovers of every kind.
	if err := syscall.Mount("tmpfs", filepath.Join(dir, "kubelet", "pods", "x"), "tmpfs", 0, "size=1m"); err != nil {
		t.Fatal(err)
	}
	bind := filepath.Join(dir, "kubelet", "pods", "x", "bind")
	if err := os.MkdirAll(bind, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(t.TempDir(), bind, "", syscall.MS_BIND, ""); err != nil {
		t.Fatal(err)
	}
	if err := ip("link", "add", "name", st.Bridge, "type", "bridge"); err != nil {
		t.Fatal(err)
	}
	if err := makeCgroupRoot(st.CgroupRoot + "/kubepods"); err != nil {
		t.Fatal(err)
	}
	named := exec.Command("tail", "-f", filepath.Join(dir, "state.json")) // a process naming the directory
	if err := named.Start(); err != nil {
		t.Fatal(err)
	}
	go named.Wait()
	contained := exec.Command("sleep", "600")
	if err := contained.Start(); err != nil {
		t.Fatal(err)
	}
	go contained.Wait()
	mounts, _ := cgroupMounts()
	for _, m := range mounts {
		if err := os.WriteFile(filepath.Join(m.dir, st.CgroupRoot, "kubepods", "cgroup.procs"), []byte(strconv.Itoa(contained.Process.Pid)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile("/proc/sys/kernel/panic_on_oops", []byte("1"), 0o644)
	if st.Sysctls["kernel/panic_on_oops"] == "1" {
		os.WriteFile("/proc/sys/kernel/panic_on_oops", []byte("0"), 0o644)
	}

	snap, err := ReadSnapshot(dir)
	if err != nil {
		t.Fatal(err)
	}
	left := strings.Join(Leftovers(dir, snap), "\n")
	for _, want := range []string{"processes", "mounts", "bridge " + st.Bridge, "cgroup ", "sysctl kernel/panic_on_oops", "directory"} {
		if !strings.Contains(left, want) {
			t.Errorf("Leftovers does not see the %s:\n%s", want, left)
		}
	}
	began := time.Now()
	if err := Down(dir); err != nil {
		t.Fatal(err)
	}
	if left := Leftovers(dir, snap); len(left) > 0 {
		t.Fatalf("after Down: %s", strings.Join(left, "; "))
	}
	if err := syscall.Kill(contained.Process.Pid, 0); err == nil {
		t.Errorf("the process in the node's cgroup survived Down")
	}
	t.Logf("Down in %s", time.Since(began))
	if err := Down(dir); err == nil {
		t.Errorf("Down of a directory without a node: no error")
	}
}
