package chaosbench

import (
	"os"
	"path"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
)

// A check holds the whole history, hundreds of megabytes for a long run, while a run's load keeps a small
// live heap and allocates fast (the run collects rarely: see cmd/chaosbench). The two need different
// collector settings.
//
// Measured on the 35- and 70-minute kubesim histories (1.1M and 2.2M operations; CheckDir under each
// setting, 2 cores, 23 GB, 2026-11-26), wall and CPU seconds and peak RSS:
//
//	GOGC 100, soft limit 1.5 GB:  35 min 32.7 s, 37.5 s, 1.53 GB   70 min 156.5 s, 293.8 s, 2.23 GB
//	GOGC 50, no limit:            35 min 32.6 s, 38.7 s, 1.47 GB   70 min  99.4 s, 113.8 s, 3.22 GB
//	GOGC 25, no limit:            35 min 35.4 s, 45.5 s, 1.37 GB   70 min 104.8 s, 124.8 s, 2.92 GB
//
// (On that machine the limit this file sets, 17 GB, is never reached: "no limit" is what it does there.)
//
// A fixed soft limit below the live heap of a long history makes the collector run without pause (the
// runtime caps it at half the CPU) and holds nothing back: the history is live. So the check collects at
// GOGC 50 (its heap peaks at one and a half times what is live, less than GOGC 100 with the fixed limit
// did on the 35-minute history) and the soft limit is a share of what the machine or the container can
// give the process: the collector works harder only when memory is really short.
const checkGCPercent = 50

// checkMemoryShare is the share of the machine's (or the container's) memory the check's soft limit
// allows: the rest is for the kernel, the page cache that serves the history files and, during a run,
// the members.
const checkMemoryShare = 0.75

// checkMemory sets the garbage collector up for a check and returns the function that restores the
// previous settings.
func checkMemory() func() {
	gc := debug.SetGCPercent(checkGCPercent)
	limit := debug.SetMemoryLimit(-1) // a negative limit reads the setting without changing it
	if avail := memoryAvailable(os.ReadFile); avail > 0 {
		debug.SetMemoryLimit(int64(float64(avail) * checkMemoryShare))
	}
	return func() {
		debug.SetGCPercent(gc)
		debug.SetMemoryLimit(limit)
	}
}

// memoryAvailable returns the bytes of memory this process may use: the smaller of the machine's memory
// (/proc/meminfo MemTotal) and every cgroup memory limit that applies to it, or 0 when none can be read.
// read reads a file (os.ReadFile).
func memoryAvailable(read func(string) ([]byte, error)) int64 {
	total := int64(0)
	if b, err := read("/proc/meminfo"); err == nil {
		total = memTotal(b)
	}
	for _, file := range cgroupMemoryFiles(read) {
		b, err := read(file)
		if err != nil {
			continue
		}
		s := strings.TrimSpace(string(b))
		if s == "max" {
			continue // v2: no limit
		}
		// v1 writes "no limit" as the largest page-aligned int64, which is above any machine's memory.
		if n, err := strconv.ParseInt(s, 10, 64); err == nil && n > 0 && (total == 0 || n < total) {
			total = n
		}
	}
	return total
}

// cgroupMemoryFiles returns the files that may hold a memory limit on this process: those at the root of
// the cgroup mounts (the process's own cgroup where it has a cgroup namespace, as in a container), and,
// from /proc/self/cgroup, those of its cgroup and of each ancestor (a limit on a parent, such as a systemd
// slice, applies too): memory.max for cgroup v2, memory.limit_in_bytes of the memory controller for v1.
func cgroupMemoryFiles(read func(string) ([]byte, error)) []string {
	files := []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}
	b, err := read("/proc/self/cgroup")
	if err != nil {
		return files
	}
	for line := range strings.Lines(string(b)) {
		// hierarchy-ID:controllers:path; v2's line is "0::path".
		f := strings.SplitN(strings.TrimSpace(line), ":", 3)
		if len(f) != 3 || !strings.HasPrefix(f[2], "/") {
			continue
		}
		var root, file string
		switch {
		case f[0] == "0" && f[1] == "":
			root, file = "/sys/fs/cgroup", "memory.max"
		case slices.Contains(strings.Split(f[1], ","), "memory"):
			root, file = "/sys/fs/cgroup/memory", "memory.limit_in_bytes"
		default:
			continue
		}
		for dir := path.Clean(f[2]); dir != "/"; dir = path.Dir(dir) {
			files = append(files, path.Join(root, dir, file))
		}
	}
	return files
}

// memTotal returns MemTotal of /proc/meminfo's text in bytes, or 0.
func memTotal(meminfo []byte) int64 {
	for line := range strings.Lines(string(meminfo)) {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return 0
			}
			return kb << 10
		}
	}
	return 0
}
