package chaosbench

import (
	"io/fs"
	"os"
	"runtime/debug"
	"testing"
)

func TestMemoryAvailable(t *testing.T) {
	const meminfo = "MemTotal:        8000000 kB\nMemFree:         100 kB\n"
	files := func(m map[string]string) func(string) ([]byte, error) {
		return func(path string) ([]byte, error) {
			if s, ok := m[path]; ok {
				return []byte(s), nil
			}
			return nil, fs.ErrNotExist
		}
	}
	for _, tc := range []struct {
		name  string
		files map[string]string
		want  int64
	}{
		{"machine only", map[string]string{"/proc/meminfo": meminfo}, 8000000 << 10},
		{"cgroup v2 without limit", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "max\n"}, 8000000 << 10},
		{"cgroup v2 limit", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "2147483648\n"}, 2 << 30},
		{"cgroup v1 without limit", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory/memory.limit_in_bytes": "9223372036854771712\n"}, 8000000 << 10},
		{"cgroup v1 limit", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory/memory.limit_in_bytes": "1073741824\n"}, 1 << 30},
		{"cgroup limit above the machine", map[string]string{"/proc/meminfo": meminfo, "/sys/fs/cgroup/memory.max": "99999999999999\n"}, 8000000 << 10},
		{"cgroup only", map[string]string{"/sys/fs/cgroup/memory.max": "4294967296"}, 4 << 30},
		{"nothing readable", map[string]string{}, 0},
		{"garbage", map[string]string{"/proc/meminfo": "MemTotal: lots kB\n", "/sys/fs/cgroup/memory.max": "?"}, 0},
		{"cgroup v2 limit on a parent slice", map[string]string{"/proc/meminfo": meminfo,
			"/proc/self/cgroup": "0::/limited.slice/job.scope\n",
			"/sys/fs/cgroup/limited.slice/job.scope/memory.max": "max\n",
			"/sys/fs/cgroup/limited.slice/memory.max":           "3221225472\n"}, 3 << 30},
		{"cgroup v2: the smallest limit on the way up", map[string]string{"/proc/meminfo": meminfo,
			"/proc/self/cgroup":             "0::/a/b\n",
			"/sys/fs/cgroup/a/b/memory.max": "1073741824\n",
			"/sys/fs/cgroup/a/memory.max":   "3221225472\n"}, 1 << 30},
		{"cgroup v1 limit on its own cgroup", map[string]string{"/proc/meminfo": meminfo,
			"/proc/self/cgroup":                                           "12:cpu,cpuacct:/other\n4:memory:/process_api/abc\n0::/\n",
			"/sys/fs/cgroup/memory/memory.limit_in_bytes":                 "9223372036854771712\n",
			"/sys/fs/cgroup/memory/process_api/abc/memory.limit_in_bytes": "2147483648\n",
			"/sys/fs/cgroup/other/memory.max":                             "1\n"}, 2 << 30},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := memoryAvailable(files(tc.files)); got != tc.want {
				t.Fatalf("memoryAvailable = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestCheckMemorySetsAndRestores checks that a check's collector settings follow this machine's memory
// and that the previous ones come back after it.
func TestCheckMemorySetsAndRestores(t *testing.T) {
	avail := memoryAvailable(os.ReadFile)
	if avail <= 0 {
		t.Skip("neither /proc/meminfo nor a cgroup memory limit is readable here")
	}
	prevGC := debug.SetGCPercent(123)
	prevLimit := debug.SetMemoryLimit(7 << 30)
	defer func() { debug.SetGCPercent(prevGC); debug.SetMemoryLimit(prevLimit) }()

	restore := checkMemory()
	if gc := debug.SetGCPercent(checkGCPercent); gc != checkGCPercent {
		t.Errorf("GOGC during a check = %d, want %d", gc, checkGCPercent)
	}
	if limit, want := debug.SetMemoryLimit(-1), int64(float64(avail)*checkMemoryShare); limit != want {
		t.Errorf("soft memory limit during a check = %d, want %d (%.2f of %d)", limit, want, checkMemoryShare, avail)
	}
	restore()
	if gc := debug.SetGCPercent(-1); gc != 123 {
		t.Errorf("GOGC after a check = %d, want 123 restored", gc)
	}
	debug.SetGCPercent(123)
	if limit := debug.SetMemoryLimit(-1); limit != 7<<30 {
		t.Errorf("soft memory limit after a check = %d, want %d restored", limit, int64(7<<30))
	}
}
