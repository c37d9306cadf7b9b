package results

import (
	"fmt"
	"io"
	"runtime/metrics"
	"syscall"
	"time"
)

// GeneratorLoad is what chaosbench itself used while it generated the load: its CPU time (the members are other
// processes and not counted, nor is the consistency check after the load; reading the history for the
// check while the load writes it, --read-during-load, is in the process and counted), the cores that
// amounts to over the load, the requests it sent per CPU-second, and its peak resident memory.
type GeneratorLoad struct {
	CPUSeconds        float64 `json:"cpu_s"`
	Cores             float64 `json:"cores"`
	RequestsPerCPUSec float64 `json:"requests_per_cpu_s"`
	MaxRSSBytes       int64   `json:"max_rss_bytes"`
	// LiveHeapBytes is the heap the garbage collector found live at its last cycle before the load ended:
	// what the generator holds (caches, queues, histograms), as opposed to the garbage it has not yet
	// collected, which MaxRSSBytes includes.
	LiveHeapBytes int64 `json:"live_heap_bytes"`
}

// LiveHeap returns the live heap at the garbage collector's last cycle.
func LiveHeap() int64 {
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return int64(s[0].Value.Uint64())
}

// CPUTime returns the CPU time this process has used so far, user and system.
func CPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// maxRSS returns this process's peak resident memory in bytes.
func maxRSS() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return ru.Maxrss * 1024 // kilobytes on Linux
}

// NewGeneratorLoad summarises the generator's CPU time cpu over a load of wall time wall that sent requests,
// with live, its live heap at the end of the load.
func NewGeneratorLoad(cpu, wall time.Duration, requests, live int64) *GeneratorLoad {
	g := &GeneratorLoad{CPUSeconds: cpu.Seconds(), MaxRSSBytes: maxRSS(), LiveHeapBytes: live}
	if wall > 0 {
		g.Cores = cpu.Seconds() / wall.Seconds()
	}
	if cpu > 0 {
		g.RequestsPerCPUSec = float64(requests) / cpu.Seconds()
	}
	return g
}

func writeGeneratorLoadText(w io.Writer, g *GeneratorLoad) {
	fmt.Fprintf(w, "generator: %.1f CPU-seconds (%.2f cores), %.0f requests per CPU-second, live heap %.0f MB, peak RSS %.0f MB\n",
		g.CPUSeconds, g.Cores, g.RequestsPerCPUSec, float64(g.LiveHeapBytes)/(1<<20), float64(g.MaxRSSBytes)/(1<<20))
}
