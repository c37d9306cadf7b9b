package results

import (
	"bufio"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// diskOf describes the mount dir lives on (the longest mount point of /proc/self/mountinfo that contains
// it) and the block device behind it, as far as /sys tells (nothing for overlay or network file systems).
func diskOf(dir string) *Disk {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil
	}
	if p, err := filepath.EvalSymlinks(abs); err == nil {
		abs = p
	}
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var best *Disk
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		d, ok := parseMountInfo(sc.Text())
		if !ok || !within(abs, d.MountPoint) {
			continue
		}
		if best == nil || len(d.MountPoint) >= len(best.MountPoint) {
			best = d
		}
	}
	if best == nil {
		return nil
	}
	blockInfo(best)
	return best
}

// parseMountInfo parses one line of /proc/self/mountinfo:
// "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue".
func parseMountInfo(line string) (*Disk, bool) {
	pre, post, ok := strings.Cut(line, " - ")
	if !ok {
		return nil, false
	}
	a, b := strings.Fields(pre), strings.Fields(post)
	if len(a) < 6 || len(b) < 2 {
		return nil, false
	}
	d := &Disk{MountPoint: unescapeMount(a[4]), FileSystem: b[0], Device: b[1]}
	d.MountOptions = strings.Split(a[5], ",")
	if len(b) > 2 {
		// Super block options (data=ordered, barrier=...) matter to fsync as much as the mount's.
		for _, o := range strings.Split(b[2], ",") {
			if o != "rw" && o != "ro" {
				d.MountOptions = append(d.MountOptions, o)
			}
		}
	}
	return d, true
}

// unescapeMount undoes mountinfo's octal escapes of spaces, tabs, newlines and backslashes.
func unescapeMount(s string) string {
	return strings.NewReplacer(`\040`, " ", `\011`, "\t", `\012`, "\n", `\134`, `\`).Replace(s)
}

func within(path, mount string) bool {
	return mount == "/" || path == mount || strings.HasPrefix(path, strings.TrimSuffix(mount, "/")+"/")
}

// blockInfo adds the model and rotation of the disk behind d.Device (a partition's disk), when /sys has
// them.
func blockInfo(d *Disk) {
	if !strings.HasPrefix(d.Device, "/dev/") {
		return
	}
	dev, err := filepath.EvalSymlinks(d.Device)
	if err != nil {
		dev = d.Device
	}
	sys, err := filepath.EvalSymlinks(filepath.Join("/sys/class/block", filepath.Base(dev)))
	if err != nil {
		return
	}
	if _, err := os.Stat(filepath.Join(sys, "partition")); err == nil {
		sys = filepath.Dir(sys)
	}
	for _, f := range []string{"device/model", "device/name"} {
		if b, err := os.ReadFile(filepath.Join(sys, f)); err == nil && strings.TrimSpace(string(b)) != "" {
			d.Model = strings.TrimSpace(string(b))
			break
		}
	}
	if b, err := os.ReadFile(filepath.Join(sys, "queue/rotational")); err == nil {
		r := strings.TrimSpace(string(b)) == "1"
		d.Rotational = &r
	}
}

// cgroupLimits returns the CPU (in cores) and memory limits of this process's control group: the tightest
// of the group and its ancestors, cgroup v2 or v1 (0: no limit or unknown).
func cgroupLimits() (cpus float64, memory int64) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0, 0
	}
	cpus = math.Inf(1)
	memory = math.MaxInt64
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 {
			continue
		}
		controllers, path := strings.Split(parts[1], ","), parts[2]
		switch {
		case parts[0] == "0" && parts[1] == "":
			walkCgroup("/sys/fs/cgroup", path, func(dir string) {
				if q, p, ok := readPair(filepath.Join(dir, "cpu.max")); ok && p > 0 {
					cpus = min(cpus, q/p)
				}
				if m, ok := readInt(filepath.Join(dir, "memory.max")); ok {
					memory = min(memory, m)
				}
			})
		case contains(controllers, "cpu"):
			walkCgroup("/sys/fs/cgroup/"+parts[1], path, func(dir string) {
				q, okq := readInt(filepath.Join(dir, "cpu.cfs_quota_us"))
				p, okp := readInt(filepath.Join(dir, "cpu.cfs_period_us"))
				if okq && okp && q > 0 && p > 0 {
					cpus = min(cpus, float64(q)/float64(p))
				}
			})
		case contains(controllers, "memory"):
			walkCgroup("/sys/fs/cgroup/memory", path, func(dir string) {
				// v1 writes "no limit" as a huge page-aligned number.
				if m, ok := readInt(filepath.Join(dir, "memory.limit_in_bytes")); ok && m < 1<<60 {
					memory = min(memory, m)
				}
			})
		}
	}
	if math.IsInf(cpus, 1) {
		cpus = 0
	}
	if memory == math.MaxInt64 {
		memory = 0
	}
	return cpus, memory
}

// walkCgroup calls f for the group at path under root and each of its ancestors up to root, where they
// exist (inside a container, the path may name a group of the host that the container cannot see).
func walkCgroup(root, path string, f func(dir string)) {
	for p := filepath.Clean("/" + path); ; p = filepath.Dir(p) {
		if st, err := os.Stat(filepath.Join(root, p)); err == nil && st.IsDir() {
			f(filepath.Join(root, p))
		}
		if p == "/" {
			return
		}
	}
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}

func readInt(path string) (int64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	return n, err == nil
}

// readPair reads cgroup v2's "quota period" (cpu.max); "max" is no limit.
func readPair(path string) (float64, float64, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 || f[0] == "max" {
		return 0, 0, false
	}
	q, err1 := strconv.ParseFloat(f[0], 64)
	p, err2 := strconv.ParseFloat(f[1], 64)
	return q, p, err1 == nil && err2 == nil
}
