package chaosbench

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/workloads/kube/profile"
)

// DefaultGrowth are the growth factors `qualify --profile` climbs: this cluster's traffic, then more of it.
var DefaultGrowth = []float64{1, 1.5, 2, 3, 4, 6, 8, 12, 16}

// growthClass names the ladder's rung at growth factor f: "2x", "1.5x".
func growthClass(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) + "x" }

// growthFactor returns the growth factor of a rung of the growth ladder ("2x" -> 2), and false for a
// preset class.
func growthFactor(class string) (float64, bool) {
	s, ok := strings.CutSuffix(class, "x")
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil && f > 0
}

// growthClasses are the rungs of the growth ladder of the options.
func (o *QualifyOptions) growthClasses() []string {
	g := o.Growth
	if len(g) == 0 {
		g = DefaultGrowth
	}
	out := make([]string, len(g))
	for i, f := range g {
		out[i] = growthClass(f)
	}
	return out
}

// validateGrowth checks --profile, --growth and --class of a growth ladder.
func (o *QualifyOptions) validateGrowth() error {
	if o.Profile == "" {
		if len(o.Growth) > 0 || o.ScaleRates {
			return outcome.Usagef("--growth and --scale-rates climb a --profile: give one")
		}
		return nil
	}
	if o.EtcdctlCompat {
		return outcome.Usagef("--profile is for the kube ladder, not --etcdctl-compat")
	}
	if _, err := profile.Load(o.Profile); err != nil {
		return err
	}
	for i, f := range o.Growth {
		if f < 0.01 || f > 1000 || (i > 0 && f <= o.Growth[i-1]) {
			return outcome.Usagef("--growth: factors between 0.01 and 1000, each larger than the one before")
		}
	}
	if o.Class != "auto" {
		f, ok := growthFactor(o.Class)
		if !ok {
			return outcome.Usagef("--class %q with --profile: auto or a growth factor such as 2x", o.Class)
		}
		o.Class = growthClass(f)
	}
	return nil
}

// isLadderClass reports whether class is a rung the options climb (a preset, or a growth factor of a
// profile).
func (o *QualifyOptions) isLadderClass(class string) bool {
	if o.Profile != "" {
		_, ok := growthFactor(class)
		return ok
	}
	return slices.Contains(Classes, class)
}

// ladder is the qualification's rungs, smallest first: the growth factors of its profile, else the
// preset classes.
func (q *Qualification) ladder() []string {
	if len(q.Ladder) > 0 {
		return q.Ladder
	}
	return Classes
}

// nodesIn reads the emulated cluster's node count from a kube run's summary ("...: 100 nodes, ...").
var nodesIn = regexp.MustCompile(`(\d+) nodes`)

// stepNodes is the node count of a step: its preset's, or what its run's summary says it emulated.
func stepNodes(class string, s *results.Summary) int {
	if n := classNodes(class); n > 0 || s == nil || s.Kube == nil {
		return n
	}
	if m := nodesIn.FindStringSubmatch(s.Kube.Cluster); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return 0
}

// allowsStep reports whether the disk is fast enough for a step: a preset class as the disk probe judged
// it; a rung of the growth ladder by its planned rate (above 1000 requests/s, the heavy-load bar, as for
// large and xlarge).
func (d *DiskQualification) allowsStep(class string, plannedRate float64) bool {
	if _, ok := growthFactor(class); !ok {
		return d.allows(class)
	}
	return d.Judgement.Fit && (plannedRate <= heavyRate || d.Judgement.Heavy)
}

// whyStep says why the disk does not allow a step.
func (d *DiskQualification) whyStep(class string, plannedRate float64) string {
	if _, ok := growthFactor(class); !ok || !d.Judgement.Fit {
		return d.why(class)
	}
	return fmt.Sprintf("%.0f requests/s is heavy load: %s", plannedRate, strings.Join(d.Judgement.NotHeavy, "; "))
}

// heavyRate is the request rate above which etcd's guidance speaks of heavy load.
const heavyRate = 1000
