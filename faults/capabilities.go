package faults

import (
	"fmt"
	"slices"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// Capabilities is what a cluster offers to faults, known before it starts.
type Capabilities struct {
	// Backend is "embed", "docker" or "external" (see clusters.Cluster.Backend).
	Backend string
	// Members is the cluster size (0: not known yet, as for an external cluster before contact).
	Members int
	// Process: members are processes chaosbench controls. Proxies: peer traffic flows through proxies.
	// ClientProxies: client traffic too.
	Process, Proxies, ClientProxies bool
	// Disk says how disk faults work: "slowfs", "strace", or "" with DiskReason saying why they cannot.
	Disk, DiskReason string
	// TrackUnsynced: the slowfs mounts keep undo logs, so kills can drop unsynced writes.
	TrackUnsynced bool
	// Images: members can be moved to another etcd release (rolling upgrades and downgrades).
	Images bool
	// Replace: members can be removed, wiped and added back (embedded clusters).
	Replace bool
	// Failpoints: members run failpoint builds and serve their gofail endpoints (embedded clusters).
	Failpoints bool
}

// Versions lists the etcd releases the schedule's upgrades and downgrades move members to, in order of
// first mention: they must be built (and their images prepared) before the run starts.
func (s Schedule) Versions() []string {
	var out []string
	for _, e := range s.Entries {
		if v := e.params.version; v != "" && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// NeedsProxies reports whether the schedule has network faults (or a nemesis that may pick one).
func (s Schedule) NeedsProxies() bool {
	for _, e := range s.Entries {
		if kinds[e.Kind].needs == needProxy {
			return true
		}
		if e.Kind == KindNemesis && slices.ContainsFunc(nemesisKinds(e), func(k string) bool { return kinds[k].needs == needProxy }) {
			return true
		}
	}
	return false
}

// NeedsDisk reports whether the schedule has disk faults (or kills that drop unsynced writes).
func (s Schedule) NeedsDisk() bool {
	for _, e := range s.Entries {
		if e.Kind == KindSlowDisk || e.params.dropUnsynced || (e.Kind == KindNemesis && e.nemesisAllows(KindSlowDisk)) {
			return true
		}
	}
	return false
}

// NeedsUnsyncedTracking reports whether the schedule has kills that drop unsynced writes.
func (s Schedule) NeedsUnsyncedTracking() bool {
	return slices.ContainsFunc(s.Entries, func(e Entry) bool { return e.params.dropUnsynced })
}

// NeedsClientProxies reports whether the schedule cuts members off from clients.
func (s Schedule) NeedsClientProxies() bool {
	return slices.ContainsFunc(s.Entries, func(e Entry) bool { return e.params.client })
}

// Validate checks the schedule against what the cluster can do and the load's duration (0: unknown), so
// that a schedule that cannot run is a usage error before anything starts.
func (s Schedule) Validate(caps Capabilities, duration time.Duration) error {
	for _, e := range s.Entries {
		bad := func(format string, args ...any) error {
			return outcome.Usagef("--faults %q: %s", e.Spec, fmt.Sprintf(format, args...))
		}
		if duration > 0 && e.At >= duration {
			return bad("starts at %s, after the load ends (--duration %s)", e.At, duration)
		}
		if err := e.Target.validate(caps.Members); err != nil {
			return bad("%v", err)
		}
		if e.Kind == KindNemesis {
			// It picks among what is available at each occurrence; but failpoints asked for by name on
			// members without them are a mistake, as in a failpoint entry of their own.
			if slices.Contains(e.params.nemesis, KindFailpoint) && !caps.Failpoints {
				return bad("%v", caps.allows(Entry{Kind: KindFailpoint}))
			}
			continue
		}
		if err := caps.allows(e); err != nil {
			return bad("%v", err)
		}
	}
	return nil
}

// allows says why the cluster cannot run e, or nil.
func (caps Capabilities) allows(e Entry) error {
	info := kinds[e.Kind]
	switch info.needs {
	case needProcess, needReplace:
		if !caps.Process {
			return fmt.Errorf("needs control of member processes, which a %s cluster does not offer", caps.Backend)
		}
		if info.needs == needReplace && !caps.Replace {
			return fmt.Errorf("replacing members is not supported on a %s cluster", caps.Backend)
		}
	case needProxy:
		if !caps.Proxies {
			return fmt.Errorf("needs peer proxies (embedded and docker clusters have them); a %s cluster has none", caps.Backend)
		}
	case needImages:
		if !caps.Images {
			return fmt.Errorf("moves members to another etcd release, which needs a docker cluster (--cluster docker); a %s cluster cannot", caps.Backend)
		}
	case needFailpoints:
		if !caps.Failpoints {
			return fmt.Errorf("needs members built with failpoints: an embedded cluster of a release with --failpoints (e.g. --etcd-version v3.6.16 --failpoints)")
		}
	case needDisk:
		if !caps.Process {
			return fmt.Errorf("needs the member processes' disks, which a %s cluster does not offer", caps.Backend)
		}
		if caps.Disk == "" {
			return fmt.Errorf("disk faults are unavailable here: %s", caps.DiskReason)
		}
		if caps.Disk == "strace" && (e.params.jitter > 0 || e.params.writeDelay+e.params.writeJitter > 0) {
			return fmt.Errorf("without FUSE, disk faults use strace, which delays fdatasync by a fixed time only (no jitter, no write delay): %s", caps.DiskReason)
		}
	}
	if e.params.dropUnsynced && !caps.TrackUnsynced {
		if caps.Disk != "slowfs" {
			return fmt.Errorf("drop-unsynced needs slowfs (FUSE) under the members' data: %s", caps.DiskReason)
		}
		return fmt.Errorf("drop-unsynced needs the slowfs mounts to track unsynced writes")
	}
	if e.params.client && !caps.ClientProxies {
		return fmt.Errorf("cutting clients off needs client proxies (--client-proxies)")
	}
	if caps.Members > 0 && caps.Members < 2 && (e.Kind == KindPartition || e.Kind == KindDelay || e.Kind == KindBandwidth || e.Kind == KindReset) {
		return fmt.Errorf("a network fault needs at least 2 members")
	}
	if e.Kind == KindReplace && caps.Members > 0 && caps.Members < 3 {
		return fmt.Errorf("replacing a member needs at least 3 members (the others keep quorum)")
	}
	return nil
}
