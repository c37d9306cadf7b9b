package faults

import (
	"fmt"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
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
