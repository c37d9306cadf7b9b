package report

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// kubeView is the report's section of a kube workload run: the Kubernetes SLOs per operation and the
// operation mix against the plan.
type kubeView struct {
	Cluster string
	// Verdict and Class are the SLO card's; Judged says the k8s-slo thresholds judged the run.
	Verdict  string
	Class    string
	Judged   bool
	SLO      []kubeSLORow
	Mix      []kubeMixRow
	Counters string
}

type kubeSLORow struct {
	Class, Op, Count, P99, Limit, Verdict, VClass string
}

type kubeMixRow struct {
	Op, Actors, Planned, Measured, Diff, Conflicts string
}

// kube builds the section and the SLO card, for runs of the kube workload. The SLOs are part of the verdict
// only when the run was judged by the k8s-slo thresholds: the card then shows their decision (pass or fail);
// otherwise it is informational, and says whether the operations were within their SLOs, never pass or fail.
func (v *view) kube(r *Run) {
	k := r.Summary.Kube
	if k == nil {
		return
	}
	var set []results.ThresholdResult
	for _, t := range r.Thresholds {
		if t.Set == "k8s-slo" {
			set = append(set, t)
		}
	}
	judgedBy := len(set) > 0
	kv := &kubeView{Cluster: k.Cluster}
	worst := results.KubeSLO{}
	for _, s := range k.SLO {
		row := kubeSLORow{Class: s.Class, Op: s.Op, Count: strconv.FormatInt(s.Count, 10), P99: fmtMs(s.P99MS), Limit: fmtMs(s.LimitMS), Verdict: "within", VClass: "ok"}
		if !s.Pass {
			row.Verdict, row.VClass = "over", "warn"
			if judgedBy {
				row.VClass = "fail"
			}
		}
		if !judgedBy && s.Pass {
			row.VClass = ""
		}
		if worst.Op == "" || s.P99MS/s.LimitMS > worst.P99MS/worst.LimitMS {
			worst = s
		}
		kv.SLO = append(kv.SLO, row)
	}
	for _, m := range k.Mix {
		diff := "too few to compare"
		if m.Compared {
			diff = fmt.Sprintf("%+.1f%%", m.DiffPercent)
		}
		kv.Mix = append(kv.Mix, kubeMixRow{Op: m.Op, Actors: strings.Join(m.Actors, ", "), Planned: trimFloat(round3(m.Planned)),
			Measured: trimFloat(round3(m.Measured)), Diff: diff, Conflicts: strconv.FormatInt(k.Conflicts[m.Op], 10)})
	}
	kv.Counters = fmt.Sprintf("largest deviation from plan %.1f%%; watch-cache relists %d (%d lists); event lease grants %d; compactions %d; writes to objects gone %d",
		k.MixDeviationPercent, k.Relists, k.CacheLists, k.EventLeaseGrants, k.Compactions, k.NotFound)
	detail := "mutating and get p99 <= 1 s, list p99 <= 30 s"
	if worst.Op != "" {
		detail = fmt.Sprintf("worst: %s p99 %s against %s; ", worst.Op, fmtMs(worst.P99MS), fmtMs(worst.LimitMS)) + detail
	}
	var card verdictRow
	if judgedBy {
		// The decision of the k8s-slo thresholds alone, by the one judge.
		o := results.Decide(&results.Summary{Thresholds: set})
		word := "pass"
		if o.Kind != outcome.OK {
			word = "fail"
		}
		card = judged("Kubernetes SLOs", word, detail+" (judged: --threshold k8s-slo)", o)
	} else {
		word := "within the SLOs"
		if !k.SLOPass {
			word = "over an SLO"
		}
		card = informational("Kubernetes SLOs", word, detail+" (informational; --threshold k8s-slo makes them decide the outcome)", !k.SLOPass)
	}
	kv.Verdict, kv.Class, kv.Judged = card.Verdict, card.Class, judgedBy
	v.Kube = kv
	v.Verdicts = append(v.Verdicts, card)
}

// generatorLoad adds what the generator used over the load to the generator's figures.
func (v *view) generatorLoad(r *Run) {
	g := r.Summary.GeneratorLoad
	if g == nil {
		return
	}
	v.Generator = append(v.Generator,
		kv{"chaosbench CPU over the load", fmt.Sprintf("%.1f CPU-seconds, %.2f cores, %.0f requests per CPU-second", g.CPUSeconds, g.Cores, g.RequestsPerCPUSec)},
		kv{"chaosbench live heap at the end of the load", fmtBytes(float64(g.LiveHeapBytes))})
}
