package metrics

import (
	"bufio"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// saturatedPercent is the host CPU use above which an interval counts as saturated: the generator and the
// members then wait for CPU, and latencies measure the machine as much as etcd.
const saturatedPercent = 90

// generator samples chaosbench's own CPU and memory and the host's CPU, at the instants the members are
// scraped, so that a report can tell a saturated generator or machine from a slow cluster. Member
// processes are children of chaosbench but are not counted in its CPU: RUSAGE_SELF excludes children.
type generator struct {
	prevT               time.Duration
	prevCPU             float64
	prevBusy, prevTotal float64
	started             bool
	cpuSum, cpuMax      float64
	hostSum, hostMax    float64
	n, hostN, saturated int
	rssMax              float64
	measuredFrom        bool
}

func (g *generator) observe(t time.Duration, measuring bool) results.ServerSample {
	sample := results.ServerSample{T: t.Seconds(), Member: results.Generator, Up: true}
	cpu := selfCPUSeconds()
	busy, total, hostOK := hostCPU()
	rss := selfRSS()
	sample.RSSBytes = rss
	if g.started {
		if dt := (t - g.prevT).Seconds(); dt > 0 {
			sample.CPUPercent = round(100*(cpu-g.prevCPU)/dt, 1)
		}
		if hostOK && total > g.prevTotal {
			sample.HostCPUBusyPercent = round(100*(busy-g.prevBusy)/(total-g.prevTotal), 1)
		}
		if measuring {
			if !g.measuredFrom {
				// The first measured interval starts here: forget the set-up's figures.
				g.cpuSum, g.cpuMax, g.hostSum, g.hostMax, g.n, g.hostN, g.saturated = 0, 0, 0, 0, 0, 0, 0
				g.measuredFrom = true
			}
			g.n++
			g.cpuSum += sample.CPUPercent
			g.cpuMax = math.Max(g.cpuMax, sample.CPUPercent)
			if hostOK {
				g.hostN++
				g.hostSum += sample.HostCPUBusyPercent
				g.hostMax = math.Max(g.hostMax, sample.HostCPUBusyPercent)
				if sample.HostCPUBusyPercent >= saturatedPercent {
					g.saturated++
				}
			}
		}
	}
	g.rssMax = math.Max(g.rssMax, rss)
	g.started, g.prevT, g.prevCPU, g.prevBusy, g.prevTotal = true, t, cpu, busy, total
	return sample
}

func (g *generator) summary() *results.GeneratorMetrics {
	out := &results.GeneratorMetrics{HostCPUs: runtime.NumCPU(), RSSBytesMax: g.rssMax, Intervals: g.hostN,
		SaturatedIntervals: g.saturated}
	if g.n > 0 {
		out.CPUPercentMean, out.CPUPercentMax = round(g.cpuSum/float64(g.n), 1), g.cpuMax
	}
	if g.hostN > 0 {
		out.HostCPUBusyMean, out.HostCPUBusyMax = round(g.hostSum/float64(g.hostN), 1), g.hostMax
	}
	return out
}

// selfCPUSeconds is the user and system CPU time of this process, children excluded.
func selfCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// hostCPU returns the busy and total jiffies of the machine from /proc/stat; iowait counts as idle.
func hostCPU() (busy, total float64, ok bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, 0, false
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 6 || fields[0] != "cpu" {
		return 0, 0, false
	}
	var idle float64
	for i, s := range fields[1:] {
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return 0, 0, false
		}
		if i >= 8 {
			break // guest and guest_nice are already counted in user and nice
		}
		total += v
		if i == 3 || i == 4 { // idle, iowait
			idle += v
		}
	}
	return total - idle, total, true
}

// selfRSS is this process's resident memory in bytes.
func selfRSS() float64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	fields := strings.Fields(string(b))
	if len(fields) < 2 {
		return 0
	}
	pages, err := strconv.ParseFloat(fields[1], 64)
	if err != nil {
		return 0
	}
	return pages * float64(os.Getpagesize())
}
