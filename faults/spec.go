package faults

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"

	"github.com/etcd-chaosbench/chaosbench/clusters/etcdbuild"
)

// A schedule is written as a list of entries, one per fault (the --faults flag takes them separated by
// commas, a scenario file as a list):
//
//	entry = kind [":" target] ["=" value] ["@" at ["~" jitter] ["+" for] ["/" every]]
//
// kill:leader@20s+5s kills the leader 20 s into the load and restarts it 5 s later;
// partition:minority=refuse@40s+10s cuts a random minority off for 10 s, refusing its connections;
// slowdisk:follower=50ms~10ms@60s+20s delays a follower's fsyncs by 50-60 ms for 20 s;
// pause:random@10s~5s+3s/30s pauses a random member for 3 s at 10-15 s, and again every 30 s.
// Times count from the start of the load (warm-up included). "nemesis[=kinds]" picks a fault (among
// kinds, "|"-separated) and a target at random, from the run's seed, at each occurrence; without "@" it
// runs every 20 s from 10 s on for 5 s each. "default" is the moderate schedule of a plain run (see
// DefaultSpecs) and "none" runs no faults.

// Kinds of fault, in the order the documentation lists them.
const (
	KindKill      = "kill"
	KindRestart   = "restart"
	KindPause     = "pause"
	KindPartition = "partition"
	KindDelay     = "delay"
	KindBandwidth = "bandwidth"
	KindReset     = "reset"
	KindSlowDisk  = "slowdisk"
	KindDefrag    = "defrag"
	KindCompact   = "compact"
	KindReplace   = "replace"
	KindSnapshot  = "snapshot"
	KindUpgrade   = "upgrade"
	KindDowngrade = "downgrade"
	KindFailpoint = "failpoint"
	KindNemesis   = "nemesis"
)

// kindInfo describes what a kind of fault needs and takes.
type kindInfo struct {
	// defaultTarget applies when the entry names none; "" means the kind takes no target.
	defaultTarget TargetKind
	// defaultFor is the window's length when the entry gives no "+for"; 0: the fault is an operation whose
	// window is the operation itself.
	defaultFor time.Duration
	// needs is what the cluster must offer.
	needs need
	help  string
}

type need uint8

const (
	needNothing    need = iota // a client connection is enough (works on external clusters)
	needProcess                // process control (kill, stop, pause)
	needProxy                  // peer proxies
	needDisk                   // slowfs mounts, or strace for fdatasync
	needReplace                // membership changes with process control
	needImages                 // members that can be moved to another etcd release (docker clusters)
	needFailpoints             // members running failpoint builds, with their gofail endpoints
)

var kinds = map[string]kindInfo{
	KindKill:      {TargetRandom, 5 * time.Second, needProcess, "SIGKILL the targets, restart them when the window ends (=drop-unsynced: lose writes not yet fsynced, as in a power failure)"},
	KindRestart:   {TargetRandom, 0, needProcess, "stop the targets gracefully (SIGTERM) and start them again after the window"},
	KindPause:     {TargetRandom, 5 * time.Second, needProcess, "SIGSTOP the targets for the window, then SIGCONT"},
	KindPartition: {TargetLeader, 10 * time.Second, needProxy, "cut the targets off from the other members (=in|out: one direction only; =refuse: refuse connections instead of blackholing them; =clients: cut clients off too; =until-snapshot: hold it, +for at most, until the leader has compacted its log past the targets, so that healing sends them a snapshot)"},
	KindDelay:     {TargetLeader, 10 * time.Second, needProxy, "delay every message to and from the targets (=100ms~20ms: delay and jitter), keeping byte order"},
	KindBandwidth: {TargetLeader, 10 * time.Second, needProxy, "limit each link of the targets to a bandwidth (=1MB, =10Mbit: per second)"},
	KindReset:     {TargetLeader, 0, needProxy, "reset the targets' peer connections (=500ms with +for: again every 500 ms)"},
	KindSlowDisk:  {TargetLeader, 10 * time.Second, needDisk, "delay the targets' fsyncs (=50ms~10ms; |write=1ms delays writes too)"},
	KindDefrag:    {TargetAll, 0, needNothing, "defragment the targets' databases, one after the other"},
	KindCompact:   {"", 0, needNothing, "compact the keyspace at the current revision (=1s with +for: again every second)"},
	KindReplace:   {TargetFollower, 0, needReplace, "remove the target, wipe its data, add it back as a learner and promote it"},
	KindSnapshot:  {TargetLeader, 0, needNothing, "save a snapshot of the target's database"},
	KindUpgrade:   {TargetAll, 0, needImages, "rolling upgrade: move the targets to another etcd release (=v3.6.16) one at a time, followers first, each on its data"},
	KindDowngrade: {TargetAll, 0, needImages, "rolling downgrade (=v3.5.35): etcd's downgrade enable first when the minor version drops, then one member at a time"},
	KindFailpoint: {TargetLeader, 5 * time.Second, needFailpoints, "arm a gofail failpoint on the targets for the window (=raftBeforeSave:panic, =beforeCommit:sleep(200ms), =afterCommit:2*panic); a member that panics is started again on its data (needs --etcd-version vX --failpoints)"},
	KindNemesis:   {"", 5 * time.Second, needNothing, "a fault picked at random (=kill|pause|...: among these) at each occurrence"},
}

// KindNames lists the kinds of fault.
var KindNames = []string{KindKill, KindRestart, KindPause, KindPartition, KindDelay, KindBandwidth, KindReset,
	KindSlowDisk, KindDefrag, KindCompact, KindReplace, KindSnapshot, KindUpgrade, KindDowngrade, KindFailpoint, KindNemesis}

// KindHelp returns one line about a kind of fault.
func KindHelp(kind string) string { return kinds[kind].help }

// Entry is one entry of a schedule: a fault, its target, and when it runs.
type Entry struct {
	// Spec is the entry as written.
	Spec   string
	Kind   string
	Target Target
	// Value is the kind-specific parameter, as written (see the kinds' help).
	Value string
	// At is the first occurrence's offset from the start of the load; each occurrence starts up to Jitter
	// later (seeded). For is the window's length; Every, when set, repeats the entry.
	At, Jitter, For, Every time.Duration

	params params
}

// params are an entry's parsed value.
type params struct {
	dropUnsynced            bool
	in, out, refuse, client bool
	delay, jitter           time.Duration
	bandwidth               int64
	interval                time.Duration
	writeDelay, writeJitter time.Duration
	nemesis                 []string
	version                 string // the release of an upgrade or downgrade ("v3.6.16")
	minor                   int    // its minor version (0 for builtin)
	failpoint               failpointAction
	untilSnapshot           bool // a partition held until the leader must send the target a snapshot
}

// Schedule is a parsed fault schedule.
type Schedule struct {
	Entries []Entry
}

// Empty reports whether the schedule runs no fault.
func (s Schedule) Empty() bool { return len(s.Entries) == 0 }

// Parse parses schedule entries (each may hold several, separated by commas). "none" alone is the empty
// schedule. Errors are usage errors naming the entry.
func Parse(specs []string) (Schedule, error) {
	var items []string
	for _, s := range specs {
		for _, item := range splitEntries(s) {
			if item = strings.TrimSpace(item); item != "" {
				items = append(items, item)
			}
		}
	}
	var sched Schedule
	for _, item := range items {
		if item == "none" {
			if len(items) > 1 {
				return Schedule{}, outcome.Usagef("--faults: \"none\" cannot be combined with other faults")
			}
			return Schedule{}, nil
		}
		e, err := parseEntry(item)
		if err != nil {
			return Schedule{}, err
		}
		sched.Entries = append(sched.Entries, e)
	}
	return sched, nil
}

// splitEntries splits on commas (entries never contain one).
func splitEntries(s string) []string { return strings.Split(s, ",") }

func parseEntry(spec string) (Entry, error) {
	bad := func(format string, args ...any) error {
		return outcome.Usagef("--faults %q: %s", spec, fmt.Sprintf(format, args...))
	}
	e := Entry{Spec: spec}
	head, when, hasWhen := strings.Cut(spec, "@")
	head, e.Value, _ = strings.Cut(head, "=")
	kind, target, hasTarget := strings.Cut(head, ":")
	e.Kind = strings.TrimSpace(kind)
	info, ok := kinds[e.Kind]
	if !ok {
		if s := outcome.Suggest(e.Kind, KindNames); s != "" {
			return Entry{}, bad("no fault %q (did you mean %s?)", e.Kind, s)
		}
		return Entry{}, bad("no fault %q (have %s)", e.Kind, strings.Join(KindNames, ", "))
	}
	switch {
	case hasTarget && info.defaultTarget == "":
		return Entry{}, bad("%s takes no target", e.Kind)
	case hasTarget:
		t, err := ParseTarget(target)
		if err != nil {
			return Entry{}, bad("%v", err)
		}
		e.Target = t
	default:
		e.Target = Target{Kind: info.defaultTarget}
	}
	if err := e.parseValue(); err != nil {
		return Entry{}, bad("%v", err)
	}
	e.For = info.defaultFor
	switch {
	case hasWhen:
		if err := e.parseWhen(when); err != nil {
			return Entry{}, bad("%v", err)
		}
	case e.Kind == KindNemesis:
		e.At, e.Jitter, e.Every = 10*time.Second, 0, 20*time.Second
	default:
		return Entry{}, bad("when? add @TIME, e.g. %s@20s+5s", spec)
	}
	if e.Kind == KindRestart && e.For > time.Hour {
		return Entry{}, bad("a restart longer than an hour")
	}
	if e.Every > 0 && e.Every <= e.For {
		return Entry{}, bad("repeats every %s but lasts %s: occurrences would overlap", e.Every, e.For)
	}
	return e, nil
}

// parseWhen parses at[~jitter][+for][/every].
func (e *Entry) parseWhen(s string) error {
	rest, every, hasEvery := strings.Cut(s, "/")
	rest, forText, hasFor := strings.Cut(rest, "+")
	at, jitter, hasJitter := strings.Cut(rest, "~")
	var err error
	if e.At, err = parseDuration("time", at); err != nil {
		return err
	}
	if hasJitter {
		if e.Jitter, err = parseDuration("jitter", jitter); err != nil {
			return err
		}
	}
	if hasFor {
		if e.For, err = parseDuration("duration", forText); err != nil {
			return err
		}
	}
	if hasEvery {
		if e.Every, err = parseDuration("interval", every); err != nil {
			return err
		}
		if e.Every == 0 {
			return fmt.Errorf("interval must be positive")
		}
	}
	return nil
}

func parseDuration(what, s string) (time.Duration, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, fmt.Errorf("missing %s", what)
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("%s %q: a duration such as 20s or 1m30s", what, s)
	}
	if d < 0 {
		return 0, fmt.Errorf("%s %s: must not be negative", what, s)
	}
	return d, nil
}

// parseDelay parses "100ms" or "100ms~20ms".
func parseDelay(s string) (delay, jitter time.Duration, err error) {
	d, j, hasJitter := strings.Cut(s, "~")
	if delay, err = parseDuration("delay", d); err != nil {
		return 0, 0, err
	}
	if hasJitter {
		if jitter, err = parseDuration("jitter", j); err != nil {
			return 0, 0, err
		}
	}
	return delay, jitter, nil
}

func (e *Entry) parseValue() error {
	v := strings.TrimSpace(e.Value)
	p := &e.params
	switch e.Kind {
	case KindKill:
		switch v {
		case "":
		case "drop-unsynced":
			p.dropUnsynced = true
		default:
			return fmt.Errorf("kill takes no value but drop-unsynced, not %q", v)
		}
	case KindFailpoint:
		var err error
		if p.failpoint, err = parseFailpoint(v); err != nil {
			return err
		}
	case KindRestart, KindPause, KindDefrag, KindReplace, KindSnapshot:
		if v != "" {
			return fmt.Errorf("%s takes no value", e.Kind)
		}
	case KindPartition:
		if v == "" {
			break
		}
		for _, w := range strings.Split(v, "|") {
			switch w {
			case "both":
				p.in, p.out = true, true
			case "in":
				p.in = true
			case "out":
				p.out = true
			case "refuse":
				p.refuse = true
			case "clients":
				p.client = true
			case "until-snapshot":
				p.untilSnapshot = true
			default:
				return fmt.Errorf("partition mode %q: in, out, both, refuse or clients", w)
			}
		}
		if p.untilSnapshot && (p.refuse || p.client || p.in != p.out) {
			return fmt.Errorf("until-snapshot holds a plain partition (both directions) until the leader must send a snapshot; it takes no other mode")
		}
		if p.refuse && p.in != p.out {
			return fmt.Errorf("refuse cuts connections, which carry both directions: it cannot be one-way")
		}
	case KindDelay:
		if v == "" {
			return fmt.Errorf("delay needs a value, e.g. delay:leader=100ms or =100ms~20ms")
		}
		var err error
		if p.delay, p.jitter, err = parseDelay(v); err != nil {
			return err
		}
		if p.delay+p.jitter == 0 {
			return fmt.Errorf("a delay of zero")
		}
	case KindBandwidth:
		if v == "" {
			return fmt.Errorf("bandwidth needs a value, e.g. bandwidth:leader=1MB (per second)")
		}
		bw, err := parseBandwidth(v)
		if err != nil {
			return err
		}
		p.bandwidth = bw
	case KindReset, KindCompact:
		if v != "" {
			d, err := parseDuration("interval", v)
			if err != nil {
				return err
			}
			if d <= 0 {
				return fmt.Errorf("interval must be positive")
			}
			p.interval = d
		}
	case KindSlowDisk:
		if v == "" {
			return fmt.Errorf("slowdisk needs a value, e.g. slowdisk:leader=50ms (fsync delay)")
		}
		for _, part := range strings.Split(v, "|") {
			var err error
			if w, ok := strings.CutPrefix(part, "write="); ok {
				p.writeDelay, p.writeJitter, err = parseDelay(w)
			} else {
				p.delay, p.jitter, err = parseDelay(strings.TrimPrefix(part, "fsync="))
			}
			if err != nil {
				return err
			}
		}
		if p.delay+p.jitter+p.writeDelay+p.writeJitter == 0 {
			return fmt.Errorf("a disk delay of zero")
		}
	case KindUpgrade, KindDowngrade:
		if v == "" {
			return fmt.Errorf("%s needs the release to move to, e.g. %s:all=v3.6.16", e.Kind, e.Kind)
		}
		p.version = v
		if v != etcdbuild.Builtin {
			r, err := etcdbuild.Parse(v)
			if err != nil {
				return err
			}
			p.version, p.minor = r.Version, r.Minor
		}
	case KindNemesis:
		if v == "" {
			break
		}
		for _, k := range strings.Split(v, "|") {
			if _, ok := kinds[k]; !ok || k == KindNemesis {
				if s := outcome.Suggest(k, KindNames); s != "" {
					return fmt.Errorf("nemesis: no fault %q (did you mean %s?)", k, s)
				}
				return fmt.Errorf("nemesis: no fault %q", k)
			}
			p.nemesis = append(p.nemesis, k)
		}
	}
	return nil
}

// parseBandwidth parses a rate per second: 1MB, 512KiB, 10Mbit, 100000 (bytes).
func parseBandwidth(s string) (int64, error) {
	t := strings.TrimSuffix(strings.TrimSpace(s), "/s")
	i := strings.IndexFunc(t, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	num, unit := t, ""
	if i >= 0 {
		num, unit = t[:i], t[i:]
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f <= 0 || math.IsInf(f, 0) {
		return 0, fmt.Errorf("bandwidth %q: a positive rate such as 1MB, 512KiB or 10Mbit (per second)", s)
	}
	mult := map[string]float64{
		"": 1, "B": 1, "KB": 1e3, "kB": 1e3, "KiB": 1 << 10, "MB": 1e6, "MiB": 1 << 20, "GB": 1e9, "GiB": 1 << 30,
		"kbit": 1e3 / 8, "Kbit": 1e3 / 8, "Mbit": 1e6 / 8, "Gbit": 1e9 / 8,
	}[unit]
	if mult == 0 {
		return 0, fmt.Errorf("bandwidth %q: unit %q: B, KB, KiB, MB, MiB, GB, GiB, kbit, Mbit or Gbit", s, unit)
	}
	bw := int64(f * mult)
	if bw < 1 {
		return 0, fmt.Errorf("bandwidth %q: less than a byte per second", s)
	}
	return bw, nil
}

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

// nemesisKinds returns the kinds a nemesis entry picks among.
func nemesisKinds(e Entry) []string {
	if len(e.params.nemesis) > 0 {
		return e.params.nemesis
	}
	return nemesisDefault
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

func (e Entry) nemesisAllows(kind string) bool {
	return len(e.params.nemesis) == 0 || slices.Contains(e.params.nemesis, kind)
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

// DefaultSpecs returns the schedule of a plain run: a leader kill at a third of the load and a leader
// partition at two thirds, long enough to force an election each (the 60 s default run gets
// kill:leader@20s+5s and partition:leader@40s+10s). Loads shorter than 30 s, of unknown length, or on
// fewer than 3 members get no default faults: the reason says why.
func DefaultSpecs(duration time.Duration, members int) (specs []string, reason string) {
	switch {
	case duration <= 0:
		return nil, "the load has no fixed duration"
	case duration < 30*time.Second:
		return nil, "the load is shorter than 30s"
	case members < 3:
		return nil, "the cluster has fewer than 3 members"
	}
	round := func(d time.Duration) time.Duration { return d.Round(time.Second) }
	killAt, killFor := round(duration/3), round(min(max(duration/12, 3*time.Second), 15*time.Second))
	partAt, partFor := round(2*duration/3), round(min(max(duration/6, 5*time.Second), 30*time.Second))
	return []string{
		fmt.Sprintf("kill:leader@%s+%s", killAt, killFor),
		fmt.Sprintf("partition:leader@%s+%s", partAt, partFor),
	}, ""
}
