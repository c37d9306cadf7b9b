package results

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
)

// Environment describes the machine a run was measured on (summary.json "environment"), so that a published
// report says what its figures apply to. It deliberately leaves out host names and addresses.
type Environment struct {
	OS       string `json:"os"`
	Arch     string `json:"arch"`
	Kernel   string `json:"kernel,omitempty"`
	CPUModel string `json:"cpu_model,omitempty"`
	CPUs     int    `json:"cpus"`
	// MemoryBytes is the machine's total memory.
	MemoryBytes int64 `json:"memory_bytes,omitempty"`
	// RunDirFS is the file system type of the run directory (ext4, xfs, overlayfs, tmpfs, fuse, ...), where
	// embedded members keep their data: etcd's fsync latency is a property of it.
	RunDirFS string `json:"run_dir_fs,omitempty"`
	// Container is true when chaosbench ran inside a container.
	Container bool `json:"container,omitempty"`
	// RunDirDisk is where the run directory is stored: its mount and the disk behind it.
	RunDirDisk *Disk `json:"run_dir_disk,omitempty"`
	// CgroupCPUs and CgroupMemoryBytes are the limits of chaosbench's control group (and of embedded
	// members, its children): the tightest of its own and its ancestors' (0: no limit).
	CgroupCPUs        float64 `json:"cgroup_cpus,omitempty"`
	CgroupMemoryBytes int64   `json:"cgroup_memory_bytes,omitempty"`
}

// Disk describes the storage of a directory: the mount it lives on and, where the kernel exposes them, the
// block device's model and whether it rotates.
type Disk struct {
	Device       string   `json:"device,omitempty"`
	MountPoint   string   `json:"mount_point,omitempty"`
	FileSystem   string   `json:"file_system,omitempty"`
	MountOptions []string `json:"mount_options,omitempty"`
	Model        string   `json:"model,omitempty"`
	Rotational   *bool    `json:"rotational,omitempty"`
}

// Fact is one named fact of a machine, as Facts lists them.
type Fact struct {
	Name, Value string
}

// Facts are the parts of the environment that decide what figures mean: hardware, kernel, storage and
// limits, in a fixed order; facts a run did not record are left out (older runs record fewer), so that
// two machines differ only in facts both recorded.
func (e *Environment) Facts() []Fact {
	if e == nil {
		return nil
	}
	var out []Fact
	add := func(name, value string) {
		if value != "" && value != "0" {
			out = append(out, Fact{name, value})
		}
	}
	add("os", e.OS+"/"+e.Arch)
	add("cpu model", e.CPUModel)
	add("cpus", strconv.Itoa(e.CPUs))
	add("memory MiB", strconv.FormatInt(e.MemoryBytes>>20, 10))
	add("kernel", e.Kernel)
	add("run directory file system", e.RunDirFS)
	if d := e.RunDirDisk; d != nil {
		add("run directory device", d.Device)
		add("disk model", d.Model)
		add("mount options", strings.Join(d.MountOptions, ","))
	}
	add("cgroup cpus", strconv.FormatFloat(e.CgroupCPUs, 'g', 3, 64))
	add("cgroup memory MiB", strconv.FormatInt(e.CgroupMemoryBytes>>20, 10))
	return out
}

// Machine is the facts in one line: "linux/amd64, AMD EPYC, 2 CPUs, ...".
func (e *Environment) Machine() string {
	var parts []string
	for _, f := range e.Facts() {
		parts = append(parts, f.Name+" "+f.Value)
	}
	return strings.Join(parts, ", ")
}

// CollectEnvironment describes this machine; dir is the run directory.
func CollectEnvironment(dir string) Environment {
	env := Environment{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		env.Kernel = strings.TrimSpace(string(b))
	}
	env.CPUModel = procField("/proc/cpuinfo", "model name", ":")
	if kb := procField("/proc/meminfo", "MemTotal", ":"); kb != "" {
		if n, err := strconv.ParseInt(strings.TrimSuffix(kb, " kB"), 10, 64); err == nil {
			env.MemoryBytes = n << 10
		}
	}
	env.RunDirFS = fileSystemType(dir)
	env.RunDirDisk = diskOf(dir)
	env.CgroupCPUs, env.CgroupMemoryBytes = cgroupLimits()
	if _, err := os.Stat("/.dockerenv"); err == nil {
		env.Container = true
	} else if _, err := os.Stat("/run/.containerenv"); err == nil {
		env.Container = true
	}
	return env
}

// procField returns the value of the first line of a /proc file that starts with key.
func procField(path, key, sep string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), sep)
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
