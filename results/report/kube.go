package report

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// kubeView is the report's section of a kube workload run: the Kubernetes SLOs per operation and the
// operation mix against the plan.
type kubeView struct {
	Cluster  string
	Verdict  string
	Class    string
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

// kube builds the section and the SLO verdict row, for runs of the kube workload.
func (v *view) kube(r *Run) {
	k := r.Summary.Kube
	if k == nil {
		return
	}
	kv := &kubeView{Cluster: k.Cluster, Verdict: "PASS", Class: "ok"}
	worst := results.KubeSLO{}
	for _, s := range k.SLO {
		row := kubeSLORow{Class: s.Class, Op: s.Op, Count: strconv.FormatInt(s.Count, 10), P99: fmtMs(s.P99MS), Limit: fmtMs(s.LimitMS), Verdict: "pass", VClass: "ok"}
		if !s.Pass {
			row.Verdict, row.VClass = "FAIL", "fail"
		}
		if worst.Op == "" || s.P99MS/s.LimitMS > worst.P99MS/worst.LimitMS {
			worst = s
		}
		kv.SLO = append(kv.SLO, row)
	}
	if !k.SLOPass {
		kv.Verdict, kv.Class = "FAIL", "fail"
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
	v.Kube = kv
	row := verdictRow{Area: "Kubernetes SLOs", Verdict: kv.Verdict, Class: kv.Class,
		Detail: "mutating and get p99 <= 1 s, list p99 <= 30 s (reported; --threshold k8s-slo enforces them)"}
	if worst.Op != "" {
		row.Detail = fmt.Sprintf("worst: %s p99 %s against %s; ", worst.Op, fmtMs(worst.P99MS), fmtMs(worst.LimitMS)) + row.Detail
	}
	v.Verdicts = append(v.Verdicts, row)
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
