package controlplane

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's CPU times (100 on Linux everywhere).
const clockTicks = 100

// Usage is a process's resource use as /proc reports it.
type Usage struct {
	// CPUSeconds is user plus system time since the process started.
	CPUSeconds float64 `json:"cpu_seconds"`
	// RSSBytes is the resident set now; PeakRSSBytes its high-water mark.
	RSSBytes     int64 `json:"rss_bytes"`
	PeakRSSBytes int64 `json:"peak_rss_bytes"`
}

// ProcUsage reads a running process's usage from /proc.
func ProcUsage(pid int) (Usage, error) {
	var u Usage
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return u, fmt.Errorf("read usage of pid %d: %w", pid, err)
	}
	s := string(stat)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return u, fmt.Errorf("read usage of pid %d: %w", pid, errNotRunning)
	}
	fields := strings.Fields(s[i+1:])
	// Fields after the command: state is [0]; utime and stime are the 14th and 15th fields of the line.
	if len(fields) < 13 {
		return u, fmt.Errorf("read usage of pid %d: short stat line", pid)
	}
	utime, _ := strconv.ParseInt(fields[11], 10, 64)
	stime, _ := strconv.ParseInt(fields[12], 10, 64)
	u.CPUSeconds = float64(utime+stime) / clockTicks
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return u, fmt.Errorf("read usage of pid %d: %w", pid, err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			continue
		}
		switch k {
		case "VmRSS":
			u.RSSBytes = kb << 10
		case "VmHWM":
			u.PeakRSSBytes = kb << 10
		}
	}
	return u, nil
}

// Usage returns every running component's usage, by name.
func (c *ControlPlane) Usage() map[string]Usage {
	out := map[string]Usage{}
	for _, p := range c.procs {
		if done, _ := p.Exited(); done {
			continue
		}
		if u, err := ProcUsage(p.PID()); err == nil {
			out[p.Name] = u
		}
	}
	return out
}

// Scrape fetches apiserver i's /metrics.
func (c *ControlPlane) Scrape(ctx context.Context, i int) (map[string]*dto.MetricFamily, error) {
	body, err := c.ScrapeText(ctx, i)
	if err != nil {
		return nil, err
	}
	return parseText(i, body)
}

// parseText parses apiserver i's metrics text.
func parseText(i int, body []byte) (map[string]*dto.MetricFamily, error) {
	var parser expfmt.TextParser
	fams, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("scrape kube-apiserver-%d: parse: %w", i, err)
	}
	return fams, nil
}

// ScrapeText fetches apiserver i's /metrics as the text it serves.
func (c *ControlPlane) ScrapeText(ctx context.Context, i int) ([]byte, error) {
	hc, err := c.HTTPClient()
	if err != nil {
		return nil, err
	}
	defer hc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.urls[i]+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape kube-apiserver-%d: %w", i, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return nil, fmt.Errorf("scrape kube-apiserver-%d: %s: %s", i, resp.Status, body)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape kube-apiserver-%d: %w", i, err)
	}
	return body, nil
}
