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
