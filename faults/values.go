package faults

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters/etcdbuild"
	"github.com/etcd-chaosbench/chaosbench/outcome"
)

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

// parseValue parses the entry's kind-specific value into its params. Each kind's value is a small language
// of its own, so each has its own parser; a kind that takes no value refuses one, rather than ignore what
// the user meant by it.
func (e *Entry) parseValue() error {
	v := strings.TrimSpace(e.Value)
	p := &e.params
	switch e.Kind {
	case KindKill:
		return p.parseKill(v)
	case KindFailpoint:
		var err error
		p.failpoint, err = parseFailpoint(v)
		return err
	case KindRestart, KindPause, KindDefrag, KindReplace, KindSnapshot:
		if v != "" {
			return fmt.Errorf("%s takes no value", e.Kind)
		}
	case KindPartition:
		return p.parsePartition(v)
	case KindDelay:
		return p.parseNetworkDelay(v)
	case KindBandwidth:
		return p.parseLinkBandwidth(v)
	case KindReset, KindCompact:
		return p.parseInterval(v)
	case KindSlowDisk:
		return p.parseDiskDelays(v)
	case KindUpgrade, KindDowngrade:
		return p.parseRelease(e.Kind, v)
	case KindNemesis:
		return p.parseNemesis(v)
	}
	return nil
}

// parseKill parses a kill's only option: drop-unsynced, a power failure rather than a crash.
func (p *params) parseKill(v string) error {
	switch v {
	case "":
	case "drop-unsynced":
		p.dropUnsynced = true
	default:
		return fmt.Errorf("kill takes no value but drop-unsynced, not %q", v)
	}
	return nil
}

// parsePartition parses a partition's modes ("in|refuse"; "" is a plain partition both ways) and refuses
// the combinations no proxy can carry out.
func (p *params) parsePartition(v string) error {
	if v == "" {
		return nil
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
	if p.untilSnapshot && (p.client || p.in != p.out) {
		return fmt.Errorf("until-snapshot holds a partition of both directions between members until the leader must send a snapshot; it takes refuse, no other mode")
	}
	if p.refuse && p.in != p.out {
		return fmt.Errorf("refuse cuts connections, which carry both directions: it cannot be one-way")
	}
	return nil
}

// parseNetworkDelay parses a delay fault's value, which it cannot do without: a delay of nothing would
// be a window without a fault.
func (p *params) parseNetworkDelay(v string) error {
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
	return nil
}

// parseLinkBandwidth parses a bandwidth fault's value, the rate each of the targets' links is limited to.
func (p *params) parseLinkBandwidth(v string) error {
	if v == "" {
		return fmt.Errorf("bandwidth needs a value, e.g. bandwidth:leader=1MB (per second)")
	}
	bw, err := parseBandwidth(v)
	if err != nil {
		return err
	}
	p.bandwidth = bw
	return nil
}

// parseInterval parses the optional repeat interval of a reset or a compaction ("" does it once).
func (p *params) parseInterval(v string) error {
	if v == "" {
		return nil
	}
	d, err := parseDuration("interval", v)
	if err != nil {
		return err
	}
	if d <= 0 {
		return fmt.Errorf("interval must be positive")
	}
	p.interval = d
	return nil
}

// parseDiskDelays parses a slow disk's delays: an fsync delay ("50ms~10ms", or "fsync=...") and a write
// delay ("write=1ms"), "|"-separated; at least one must delay something.
func (p *params) parseDiskDelays(v string) error {
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
	return nil
}

// parseRelease parses the release an upgrade or downgrade (kind) moves members to: "builtin" or a
// version, whose minor version decides how a downgrade goes.
func (p *params) parseRelease(kind, v string) error {
	if v == "" {
		return fmt.Errorf("%s needs the release to move to, e.g. %s:all=v3.6.16", kind, kind)
	}
	p.version = v
	if v != etcdbuild.Builtin {
		r, err := etcdbuild.Parse(v)
		if err != nil {
			return err
		}
		p.version, p.minor = r.Version, r.Minor
	}
	return nil
}

// parseNemesis parses the kinds a nemesis picks among ("kill|pause"; "" lets it pick among the default
// ones). A nemesis cannot pick a nemesis.
func (p *params) parseNemesis(v string) error {
	if v == "" {
		return nil
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
