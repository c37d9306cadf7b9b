package kubenode

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"github.com/etcd-chaosbench/chaosbench/clusters/slowfs"
)

// Unavailable is the error Start returns when this machine cannot run a node at all (not root, no
// container runtime, no CNI plugins, no cgroups): a test skips with its message, CI fails with it.
type Unavailable struct{ Reason string }

func (e *Unavailable) Error() string { return "no local Kubernetes node here: " + e.Reason }

// The Debian packages a node needs, with a program of each.
var hostTools = []struct{ path, pkg string }{
	{"containerd", "containerd"},
	{"containerd-shim-runc-v2", "containerd"},
	{"ctr", "containerd"},
	{"runc", "runc"},
	{"ip", "iproute2"},
}

// CNIDir is where Debian's containernetworking-plugins installs the CNI plugins.
const CNIDir = "/usr/lib/cni"

// CheckHost says what this machine lacks to run a node: root, containerd and runc, the CNI plugins,
// cgroups. nil when nothing is missing.
func CheckHost() error {
	if os.Geteuid() != 0 {
		return &Unavailable{Reason: "a kubelet and containerd need root (running as uid " + fmt.Sprint(os.Geteuid()) + ")"}
	}
	var missing []string
	for _, t := range hostTools {
		if _, err := exec.LookPath(t.path); err != nil {
			missing = append(missing, fmt.Sprintf("%s (Debian package %s)", t.path, t.pkg))
		}
	}
	for _, p := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(CNIDir, p)); err != nil {
			missing = append(missing, fmt.Sprintf("%s/%s (Debian package containernetworking-plugins)", CNIDir, p))
		}
	}
	if len(missing) > 0 {
		return &Unavailable{Reason: "missing " + strings.Join(missing, ", ")}
	}
	if _, err := cgroupMounts(); err != nil {
		return &Unavailable{Reason: err.Error()}
	}
	return nil
}

// cgroupMount is one mounted cgroup hierarchy: its mount point, and whether it is cgroup v2.
type cgroupMount struct {
	dir string
	v2  bool
}

// cgroupMounts returns the hierarchies the kubelet and runc use: every cgroup v1 hierarchy (and a hybrid
// system's unified one, last), or the unified one alone when /sys/fs/cgroup itself is cgroup v2.
func cgroupMounts() ([]cgroupMount, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs("/sys/fs/cgroup", &st); err != nil {
		return nil, fmt.Errorf("no /sys/fs/cgroup: %w", err)
	}
	const cgroup2Magic = 0x63677270
	if st.Type == cgroup2Magic {
		return []cgroupMount{{dir: "/sys/fs/cgroup", v2: true}}, nil
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil, fmt.Errorf("read mounts: %w", err)
	}
	defer f.Close()
	var out, unified []cgroupMount
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// 36 35 0:30 / /sys/fs/cgroup/cpu rw,relatime shared:9 - cgroup cgroup rw,cpu
		// A hybrid system also mounts the unified hierarchy (cgroup2, /sys/fs/cgroup/unified), where runc
		// places its containers too: it is listed after the v1 ones.
		pre, post, ok := strings.Cut(sc.Text(), " - ")
		fields, postFields := strings.Fields(pre), strings.Fields(post)
		if !ok || len(fields) < 5 || len(postFields) < 1 {
			continue
		}
		switch postFields[0] {
		case "cgroup":
			out = append(out, cgroupMount{dir: fields[4]})
		case "cgroup2":
			unified = append(unified, cgroupMount{dir: fields[4], v2: true})
		}
	}
	out = append(out, unified...)
	if len(out) == len(unified) {
		return nil, errors.New("no cgroup v1 hierarchy is mounted, and /sys/fs/cgroup is not cgroup v2")
	}
	return out, nil
}

// makeCgroupRoot creates the node's cgroup root (name, e.g. /chaosbench-node-1a2b) in every hierarchy;
// the kubelet places its pods under it, and teardown removes it. A cpuset child starts with no CPUs and
// no memory nodes: it gets its parent's.
func makeCgroupRoot(name string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	for _, m := range mounts {
		parent := m.dir
		for _, part := range strings.Split(strings.Trim(name, "/"), "/") {
			dir := filepath.Join(parent, part)
			if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return fmt.Errorf("create cgroup %s: %w", dir, err)
			}
			if filepath.Base(m.dir) == "cpuset" && !m.v2 {
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					v, err := os.ReadFile(filepath.Join(parent, f))
					if err == nil {
						err = os.WriteFile(filepath.Join(dir, f), v, 0o644)
					}
					if err != nil {
						return fmt.Errorf("cgroup %s: %w", dir, err)
					}
				}
			}
			parent = dir
		}
	}
	return nil
}

// removeCgroupRoot removes the node's cgroup root in every hierarchy, deepest groups first; a group that
// still has processes cannot be removed, and is reported.
func removeCgroupRoot(name string) error {
	mounts, err := cgroupMounts()
	if err != nil {
		return err
	}
	var errs []error
	for _, m := range mounts {
		root := filepath.Join(m.dir, name)
		var dirs []string
		filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := syscall.Rmdir(d); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
			}
		}
	}
	return errors.Join(errs...)
}

// mountsUnder returns the mount points at or below dir, deepest first (slowfs.MountsUnder reads them).
func mountsUnder(dir string) ([]string, error) {
	out, err := slowfs.MountsUnder(dir)
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, err
}

// unmountUnder unmounts everything mounted at or below dir (pods' volumes, the sandboxes' network
// namespaces, containerd's overlay mounts), deepest first.
func unmountUnder(dir string) error {
	var errs []error
	for range 3 { // a mount can hide another one at the same point
		mounts, err := mountsUnder(dir)
		if err != nil {
			return err
		}
		if len(mounts) == 0 {
			return nil
		}
		errs = errs[:0]
		for _, m := range mounts {
			if err := syscall.Unmount(m, 0); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, os.ErrNotExist) {
				if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
					errs = append(errs, fmt.Errorf("unmount %s: %w", m, err))
				}
			}
		}
	}
	if mounts, _ := mountsUnder(dir); len(mounts) > 0 {
		errs = append(errs, fmt.Errorf("still mounted: %s", strings.Join(mounts, ", ")))
	}
	return errors.Join(errs...)
}

// ip runs the ip command (iproute2).
func ip(args ...string) error {
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// linkExists reports whether a network interface of that name exists.
func linkExists(name string) bool {
	_, err := os.Stat(filepath.Join("/sys/class/net", name))
	return err == nil
}

// processesUnder returns the processes whose command line mentions dir (containerd's shims name its
// socket; everything the node started names its directory), but not this process.
func processesUnder(dir string) []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil || pid == os.Getpid() {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		if strings.Contains(string(cmdline), dir) {
			out = append(out, pid)
		}
	}
	return out
}

// iptables runs iptables (Debian's, nf_tables backend).
func iptables(args ...string) error {
	out, err := exec.Command("iptables", append([]string{"-w"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// dockerUserChain reports whether Docker's DOCKER-USER chain exists (Docker runs with its iptables rules).
func dockerUserChain() bool {
	if _, err := exec.LookPath("iptables"); err != nil {
		return false
	}
	return iptables("-S", "DOCKER-USER") == nil
}

// dockerUserRules are the rules that let a bridge's traffic through Docker's forwarding policy.
func dockerUserRules(bridge string) [][]string {
	return [][]string{{"-i", bridge, "-j", "ACCEPT"}, {"-o", bridge, "-j", "ACCEPT"}}
}
