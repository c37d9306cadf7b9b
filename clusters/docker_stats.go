package clusters

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
)

// CPUThrottling is how often a member's container hit its CPU limit (the kernel's CFS quota) since it
// started: the direct evidence that a member was held back by --member-cpus. A member's average CPU can
// stay well under its limit while it is throttled in most periods: at 0.1 cores it may run 10 ms of every
// 100 ms, and a burst that needs more waits for the next period, fsync and commit included.
type CPUThrottling struct {
	Periods          uint64
	ThrottledPeriods uint64
	ThrottledTime    time.Duration
}

// Percent is the share of CPU periods in which the container was throttled.
func (t CPUThrottling) Percent() float64 {
	if t.Periods == 0 {
		return 0
	}
	return 100 * float64(t.ThrottledPeriods) / float64(t.Periods)
}

// CPUThrottler is a cluster whose members run under CPU limits it can read back (docker).
type CPUThrottler interface {
	CPUThrottling(ctx context.Context) (map[string]CPUThrottling, error)
}

// CPUThrottling reads each running member container's CPU throttling counters from Docker's stats, by
// member name. Members without a CPU limit have no periods.
func (c *Docker) CPUThrottling(ctx context.Context) (map[string]CPUThrottling, error) {
	out := map[string]CPUThrottling{}
	for _, m := range c.members {
		if !m.Running() {
			continue
		}
		res, err := c.docker.ContainerStats(ctx, m.ContainerID(), client.ContainerStatsOptions{})
		if err != nil {
			return out, fmt.Errorf("stats of %s: %w", m.name, err)
		}
		var st container.StatsResponse
		err = json.NewDecoder(res.Body).Decode(&st)
		res.Body.Close()
		if err != nil {
			return out, fmt.Errorf("stats of %s: %w", m.name, err)
		}
		td := st.CPUStats.ThrottlingData
		out[m.name] = CPUThrottling{Periods: td.Periods, ThrottledPeriods: td.ThrottledPeriods, ThrottledTime: time.Duration(td.ThrottledTime)}
	}
	return out, nil
}
