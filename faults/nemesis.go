package faults

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
)

// nemesisChoices lists, per kind, the targets a nemesis picks among, with the value it gives.
var nemesisChoices = map[string]struct {
	targets []string
	values  []string
}{
	KindKill:      {[]string{"leader", "follower", "random"}, []string{""}},
	KindRestart:   {[]string{"leader", "follower"}, []string{""}},
	KindPause:     {[]string{"leader", "follower", "random"}, []string{""}},
	KindPartition: {[]string{"leader", "follower", "minority"}, []string{"", "in", "out", "refuse"}},
	KindDelay:     {[]string{"leader", "random", "all"}, []string{"50ms~10ms", "100ms~20ms", "200ms~50ms"}},
	KindBandwidth: {[]string{"leader", "random"}, []string{"256KiB", "1MiB"}},
	KindReset:     {[]string{"leader", "random"}, []string{"", "500ms"}},
	KindSlowDisk:  {[]string{"leader", "follower", "all"}, []string{"20ms", "50ms", "100ms"}},
	KindDefrag:    {[]string{"random", "all"}, []string{""}},
	KindCompact:   {nil, []string{"", "1s"}},
	KindSnapshot:  {[]string{"leader", "random"}, []string{""}},
	KindReplace:   {[]string{"follower"}, []string{""}},
	// Points reached under any write load: the WAL save, the backend commit, the apply of an entry.
	KindFailpoint: {[]string{"leader", "follower"}, []string{"raftBeforeSave:1*panic", "raftAfterSave:1*panic",
		"beforeCommit:1*panic", "beforeApplyOneEntryNormal:1*panic", "raftBeforeSave:sleep(100ms)", "beforeCommit:sleep(200ms)"}},
}

// nemesisDefault is what a nemesis picks among when its entry names no kinds: every fault but member
// replacement, which reshapes the cluster for minutes.
var nemesisDefault = []string{KindKill, KindRestart, KindPause, KindPartition, KindDelay, KindBandwidth, KindReset,
	KindSlowDisk, KindDefrag, KindCompact, KindSnapshot}

// pickNemesis turns a nemesis entry into a concrete entry: a kind available on the cluster, a target and
// a value, all from the entry's seeded source. Strace-backed disks take no jitter; values are chosen to
// fit. When no kind is available it returns an error saying why for each.
func (r *Runner) pickNemesis(e Entry, rng *rand.Rand) (Entry, error) {
	allowed := e.params.nemesis
	if len(allowed) == 0 {
		allowed = nemesisDefault
		if (&Failpoint{}).Available(r.env.Cluster) == nil {
			// Members with failpoints: the nemesis may crash or stall them at the points where bugs hid.
			allowed = append(slices.Clone(nemesisDefault), KindFailpoint)
		}
	}
	var candidates []Entry
	var why []string
	n := len(r.env.Cluster.Members())
	for _, kind := range allowed {
		ch := nemesisChoices[kind]
		targets := ch.targets
		if targets == nil {
			targets = []string{""}
		}
		t := targets[rng.IntN(len(targets))]
		if (t == "minority" && n < 3) || ((t == "follower" || t == "leader") && n < 2 && kind != KindKill && kind != KindPause && kind != KindRestart) {
			t = "random"
		}
		v := ch.values[rng.IntN(len(ch.values))]
		spec := kind
		if t != "" {
			spec += ":" + t
		}
		if v != "" {
			spec += "=" + v
		}
		spec += fmt.Sprintf("@0s+%s", e.For)
		c, err := parseEntry(spec)
		if err != nil {
			why = append(why, fmt.Sprintf("%s: %v", kind, err))
			continue
		}
		if kinds[kind].defaultFor == 0 && c.params.interval == 0 {
			c.For = 0 // an operation: its window is the operation itself
			spec = strings.Replace(spec, "+"+e.For.String(), "", 1)
		}
		f, err := New(c, r.env)
		if err == nil {
			err = f.Available(r.env.Cluster)
		}
		if err != nil {
			why = append(why, fmt.Sprintf("%s: %v", kind, err))
			continue
		}
		c.Spec = strings.Replace(spec, "@0s", "", 1) + " (nemesis)"
		candidates = append(candidates, c)
	}
	if len(candidates) == 0 {
		return Entry{}, fmt.Errorf("nothing injected: no fault of the nemesis is available on this cluster (%s)", strings.Join(why, "; "))
	}
	return candidates[rng.IntN(len(candidates))], nil
}

// nemesisKinds returns the kinds a nemesis entry picks among.
func nemesisKinds(e Entry) []string {
	if len(e.params.nemesis) > 0 {
		return e.params.nemesis
	}
	return nemesisDefault
}

func (e Entry) nemesisAllows(kind string) bool {
	return len(e.params.nemesis) == 0 || slices.Contains(e.params.nemesis, kind)
}
