package results

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"text/tabwriter"
)

// Kube is the kube workload's part of a summary: the emulated cluster, the planned operation mix against the
// measured one, what the operation table does not show (conflicts, relists, lease grants), and the
// Kubernetes API latency SLOs applied to the etcd requests behind the API calls.
type Kube struct {
	// Cluster describes the emulated Kubernetes cluster in one line.
	Cluster string `json:"cluster"`
	// Mix compares each planned operation's measured rate with its plan.
	Mix []KubeMix `json:"mix"`
	// MixDeviationPercent is the largest deviation of a measured rate from its plan, among operations
	// expected at least MixMinCount times during the measured period.
	MixDeviationPercent float64 `json:"mix_deviation_percent"`
	// Conflicts counts optimistic-concurrency conflicts per operation: updates and deletes whose
	// ModRevision compare failed and that were retried with the object etcd returned.
	Conflicts map[string]int64 `json:"conflicts,omitempty"`
	// NotFound counts updates and deletes of objects that were gone (deleted by a write that failed on the
	// client but took effect, or expired with their lease).
	NotFound int64 `json:"not_found"`
	// Relists counts watch caches that relisted because their watch revision was compacted; CacheLists
	// counts every list the watch caches made, the initial ones included.
	Relists    int64 `json:"relists"`
	CacheLists int64 `json:"cache_lists"`
	// EventLeaseGrants is the number of leases granted for events.
	EventLeaseGrants int64 `json:"event_lease_grants"`
	// Compactions is the number of compactions the simulated apiservers made.
	Compactions int64 `json:"compactions"`
	// SLO is the Kubernetes API call latency SLOs, per operation.
	SLO []KubeSLO `json:"slo"`
	// SLOPass is true when every operation met its SLO.
	SLOPass bool `json:"slo_pass"`
}

// MixMinCount is how often an operation must be expected during the measured period for its rate to be
// compared with the plan: rarer ones (compactions, count polls of a short run) are too few to compare.
const MixMinCount = 100

// KubeMix is one operation's planned and measured rate.
type KubeMix struct {
	Op       string   `json:"op"`
	Actors   []string `json:"actors"`
	Planned  float64  `json:"planned_per_s"`
	Measured float64  `json:"measured_per_s"`
	// DiffPercent is (measured - planned) / planned, in percent.
	DiffPercent float64 `json:"diff_percent"`
	// Compared is false for operations too rare to compare (see MixMinCount).
	Compared bool `json:"compared"`
}

// KubeSLO is one operation judged by the SLO of its API call class.
type KubeSLO struct {
	Class   string  `json:"class"` // mutating, get or list
	Op      string  `json:"op"`
	Count   int64   `json:"count"`
	P99MS   float64 `json:"p99_ms"`
	LimitMS float64 `json:"limit_ms"`
	Pass    bool    `json:"pass"`
}

// SLOLimit is the Kubernetes API call latency SLO (SIG scalability) of one verb: its call class and p99
// limit in milliseconds.
type SLOLimit struct {
	Verb, Class string
	LimitMS     float64
}

// SLOLimits lists the SLOs of the verbs they judge: mutating calls and single-object reads p99 <= 1 s,
// namespace- or cluster-scoped lists p99 <= 30 s. The report's k8s-slo threshold set is built from it.
func SLOLimits() []SLOLimit {
	return []SLOLimit{
		{"create", "mutating", 1000}, {"update", "mutating", 1000}, {"delete", "mutating", 1000},
		{"get", "get", 1000}, {"list", "list", 30000},
	}
}

// SLOClass returns the API call class an operation's verb (the part before "/") belongs to and its limit;
// class "" for operations no SLO judges.
func SLOClass(op string) (class string, limitMS float64) {
	verb, _, _ := strings.Cut(op, "/")
	for _, l := range SLOLimits() {
		if l.Verb == verb {
			return l.Class, l.LimitMS
		}
	}
	return "", 0
}

// JudgeSLO applies the SLOs to every operation with an API call class, on response time (from the
// intended start) p99.
func JudgeSLO(ops map[string]*Operation) ([]KubeSLO, bool) {
	names := make([]string, 0, len(ops))
	for name := range ops {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []KubeSLO
	pass := true
	for _, name := range names {
		class, limit := SLOClass(name)
		op := ops[name]
		if class == "" || op.Count == 0 {
			continue
		}
		ok := op.Response.P99 <= limit
		pass = pass && ok
		out = append(out, KubeSLO{Class: class, Op: name, Count: op.Count, P99MS: op.Response.P99, LimitMS: limit, Pass: ok})
	}
	return out, pass
}

// CompareMix compares measured operation rates with planned ones (several actors may plan the same
// operation: their rates add up).
func CompareMix(planned map[string]float64, actors map[string][]string, ops map[string]*Operation, measuredSeconds float64) ([]KubeMix, float64) {
	names := make([]string, 0, len(planned))
	for name := range planned {
		names = append(names, name)
	}
	sort.Strings(names)
	var out []KubeMix
	worst := 0.0
	for _, name := range names {
		m := KubeMix{Op: name, Actors: actors[name], Planned: planned[name]}
		if op := ops[name]; op != nil && measuredSeconds > 0 {
			n := op.Count
			if strings.HasPrefix(name, "update/") || strings.HasPrefix(name, "delete/") {
				// An update or delete whose comparison failed is retried: the plan counts the operation
				// once, the failed attempts are its conflicts.
				n -= op.Failed
			}
			m.Measured = float64(n) / measuredSeconds
		}
		m.DiffPercent = 100 * (m.Measured - m.Planned) / m.Planned
		m.Compared = m.Planned*measuredSeconds >= MixMinCount
		if m.Compared {
			worst = math.Max(worst, math.Abs(m.DiffPercent))
		}
		out = append(out, m)
	}
	return out, worst
}

// writeKubeText prints the kube workload's section of the text summary.
func writeKubeText(w io.Writer, k *Kube) error {
	fmt.Fprintf(w, "\nkube workload: %s\n", k.Cluster)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "operation\tplanned/s\tmeasured/s\tdiff\tconflicts\t")
	for _, m := range k.Mix {
		diff := "(too few)"
		if m.Compared {
			diff = fmt.Sprintf("%+.1f%%", m.DiffPercent)
		}
		fmt.Fprintf(tw, "%s\t%.3f\t%.3f\t%s\t%d\t\n", m.Op, m.Planned, m.Measured, diff, k.Conflicts[m.Op])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(w, "operation mix: largest deviation from plan %.1f%% (a short run cuts the pod steps due after its end); watch cache relists %d (lists %d); event lease grants %d; compactions %d; writes to objects gone %d\n",
		k.MixDeviationPercent, k.Relists, k.CacheLists, k.EventLeaseGrants, k.Compactions, k.NotFound)
	// Not a verdict: the k8s-slo thresholds are, when the run was judged by them (the verdict lines say so).
	verdict := "within the SLOs"
	if !k.SLOPass {
		verdict = "over an SLO"
	}
	fmt.Fprintf(w, "Kubernetes SLOs (p99 over the run, faults included: mutating <= 1s, get <= 1s, list <= 30s): %s (informational; --threshold k8s-slo makes them decide the exit code)\n", verdict)
	worst := map[string]KubeSLO{}
	var classes []string
	for _, s := range k.SLO {
		cur, seen := worst[s.Class]
		if !seen {
			classes = append(classes, s.Class)
		}
		if !seen || s.P99MS/s.LimitMS > cur.P99MS/cur.LimitMS {
			worst[s.Class] = s
		}
	}
	for _, class := range classes {
		s := worst[class]
		mark := "within"
		if !s.Pass {
			mark = "over"
		}
		fmt.Fprintf(w, "  %-8s worst %s p99 %s (limit %s): %s\n", class, s.Op, fmtMs(s.P99MS), fmtMs(s.LimitMS), mark)
	}
	return nil
}
