package report

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// environment lists what the run measured on and with (versions, cluster, machine, disk, limits, the
// members' own account of themselves, seed, schedule, time, command) and every setting of its
// configuration, so that a published report says what its figures apply to and how to run it again.
// Facts the run did not record are left out rather than shown empty.
func (v *view) environment(r *Run) {
	s := r.Summary
	add := func(k, val string) {
		if val != "" {
			v.Env = append(v.Env, kv{k, val})
		}
	}
	add("chaosbench", s.Versions.Chaosbench)
	add("etcd server", s.Versions.EtcdServer)
	add("etcd client", s.Versions.EtcdClient)
	add("Go", s.Versions.Go)
	if s.Cluster.Backend != "" {
		add("cluster", fmt.Sprintf("%s, %d members", s.Cluster.Backend, s.Cluster.Members))
	}
	add("etcd flags", strings.Join(s.Cluster.EtcdFlags, " "))
	if e := s.Environment; e != nil {
		add("machine", machineText(e))
		add("run directory file system", e.RunDirFS)
		if d := e.RunDirDisk; d != nil {
			add("run directory disk", diskText(d))
		}
		add("cgroup limits", limitsText(e.CgroupCPUs, e.CgroupMemoryBytes))
	}
	add("member limits", limitsText(s.Cluster.MemberCPUs, s.Cluster.MemberMemoryBytes))
	if sv := s.Server; sv != nil {
		add("members", membersText(sv.Members))
	}
	if s.Seed != 0 {
		add("seed", strconv.FormatInt(s.Seed, 10))
	}
	add("schedule", scheduleText(s.Schedule))
	if !s.Start.IsZero() {
		add("time", fmt.Sprintf("%s to %s (%s; warm-up %s, measured %s)", s.Start.UTC().Format(time.RFC3339), s.End.UTC().Format(time.RFC3339),
			fmtSeconds(s.DurationSeconds), fmtSeconds(s.WarmupSeconds), fmtSeconds(s.MeasuredSeconds)))
	}
	add("command", strings.Join(s.Command, " "))
	v.Config = configSettings(s.Config)
}

// machineText describes the machine chaosbench ran on in one line: what decides the figures (platform,
// CPUs, memory, kernel) and whether a container stood between them and the hardware.
func machineText(e *results.Environment) string {
	m := fmt.Sprintf("%s/%s, %d CPUs", e.OS, e.Arch, e.CPUs)
	if e.CPUModel != "" {
		m += " (" + e.CPUModel + ")"
	}
	if e.MemoryBytes > 0 {
		m += ", " + fmtBytes(float64(e.MemoryBytes)) + " memory"
	}
	if e.Kernel != "" {
		m += ", kernel " + e.Kernel
	}
	if e.Container {
		m += ", in a container"
	}
	return m
}

// diskText describes the storage of the run directory, where embedded members fsync: its mount, the
// device's model, whether it rotates and the mount options.
func diskText(d *results.Disk) string {
	disk := strings.TrimSpace(fmt.Sprintf("%s on %s", d.Device, d.MountPoint))
	if d.Model != "" {
		disk += ", " + d.Model
	}
	if d.Rotational != nil {
		disk += map[bool]string{true: ", rotational", false: ", solid state"}[*d.Rotational]
	}
	if len(d.MountOptions) > 0 {
		disk += " (" + strings.Join(d.MountOptions, ",") + ")"
	}
	return disk
}

// limitsText describes CPU and memory limits (of a control group, of a member's container); "" when
// there is none, 0 meaning no limit.
func limitsText(cpus float64, memoryBytes int64) string {
	var limits []string
	if cpus > 0 {
		limits = append(limits, fmt.Sprintf("%g CPUs", cpus))
	}
	if memoryBytes > 0 {
		limits = append(limits, fmtBytes(float64(memoryBytes))+" memory")
	}
	return strings.Join(limits, ", ")
}

// membersText is what each member says of itself in its metrics: the only facts there are about an
// external cluster's machines.
func membersText(members []results.MemberMetrics) string {
	var ms []string
	for _, m := range members {
		var parts []string
		if m.ServerVersion != "" {
			parts = append(parts, "etcd "+m.ServerVersion)
		}
		if m.GoVersion != "" {
			parts = append(parts, m.GoVersion)
		}
		if m.RSSBytesMax > 0 {
			parts = append(parts, fmtBytes(m.RSSBytesMax)+" resident")
		}
		if m.DBSizeBytes > 0 {
			db := "db " + fmtBytes(m.DBSizeBytes)
			if m.QuotaBackendBytes > 0 {
				db += " of " + fmtBytes(m.QuotaBackendBytes) + " quota"
			}
			parts = append(parts, db)
		}
		if m.GoroutinesMax > 0 {
			parts = append(parts, fmt.Sprintf("%.0f goroutines", m.GoroutinesMax))
		}
		if len(parts) > 0 {
			ms = append(ms, m.Name+": "+strings.Join(parts, ", "))
		}
	}
	return strings.Join(ms, "; ")
}

// scheduleText says how the load was offered: the mode (for an open loop, its target rate) and the clients
// and connections that carried it.
func scheduleText(sc results.Schedule) string {
	mode := sc.Mode
	if sc.Mode == "open" {
		mode = fmt.Sprintf("open loop at %.0f ops/s", sc.TargetRate)
	}
	return fmt.Sprintf("%s, %d clients over %d connections", mode, sc.Clients, sc.Conns)
}

// configSettings lists every setting of the run's configuration as dotted keys, sorted; a configuration
// that is not JSON has none rather than breaking the report.
func configSettings(raw json.RawMessage) []kv {
	if len(raw) == 0 {
		return nil
	}
	var cfg any
	if json.Unmarshal(raw, &cfg) != nil {
		return nil
	}
	var out []kv
	flatten("", cfg, &out)
	return out
}

// flatten lists a JSON value's leaves as dotted keys, sorted.
func flatten(prefix string, val any, out *[]kv) {
	switch t := val.(type) {
	case map[string]any:
		for _, k := range sortedKeys(t) {
			key := k
			if prefix != "" {
				key = prefix + "." + k
			}
			flatten(key, t[k], out)
		}
	default:
		b, _ := json.Marshal(t)
		*out = append(*out, kv{prefix, compactJSON(b)})
	}
}
