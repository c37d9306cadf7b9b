package chaosbench

import (
	"fmt"
	"io"
	"strings"

	"github.com/docker/go-units"
)

// QualifyPlan prints what Qualify would do, the disk probe and each step of the ladder (or of the
// etcdctl-compat loads), after checking the options as Qualify does, and starts nothing.
func QualifyPlan(o QualifyOptions, w io.Writer) error {
	if err := o.validate(); err != nil {
		return err
	}
	fmt.Fprintf(w, "qualify (dry run): a %d-member %s cluster", o.Scenario.Members, o.Scenario.Cluster)
	if o.Scenario.EtcdVersion != "" {
		fmt.Fprintf(w, ", etcd %s", o.Scenario.EtcdVersion)
	}
	fmt.Fprintln(w)
	switch {
	case len(o.DiskResults) > 0:
		fmt.Fprintf(w, "disk: the attached results %s, the worst deciding\n", strings.Join(o.DiskResults, ", "))
	case !o.DiskProbe:
		fmt.Fprintln(w, "disk: not probed (--disk-probe=false)")
	case o.Scenario.Cluster == "embed" && o.DataRoot != "":
		fmt.Fprintf(w, "disk: probed under %s, %s per pattern\n", o.DataRoot, units.BytesSize(float64(o.DiskSize)))
	case o.Scenario.Cluster == "external":
		fmt.Fprintln(w, "disk: cannot be probed from here; attach `chaosbench qualify disk --json FILE` from each member's host with --disk-result")
	default:
		fmt.Fprintf(w, "disk: probed where the members' data goes (%s cluster), %s per pattern\n", o.Scenario.Cluster, units.BytesSize(float64(o.DiskSize)))
	}
	if o.EtcdctlCompat {
		loads, _ := o.compatLoads()
		for _, l := range loads {
			fmt.Fprintf(w, "load %s: etcdctl check perf's put load, %.0f writes/s from %d clients for %s, judged by its rule\n",
				l.Name, l.Rate, l.Clients, o.CompatDuration)
		}
		return nil
	}
	for _, c := range o.classes() {
		what := fmt.Sprintf("the kube workload for a %d-node cluster", o.nodes(c))
		if o.Profile != "" {
			what = fmt.Sprintf("the kube workload of profile %s grown %s (%d nodes)", o.Profile, c, o.nodes(c))
		}
		fmt.Fprintf(w, "step %s: %s, %s after %s of warm-up, no faults, judged by %s\n",
			c, what, o.StepDuration, o.Warmup, strings.Join(stepThresholds, ", "))
	}
	if o.EarlyStop && o.MinStep < o.StepDuration {
		fmt.Fprintf(w, "a step ends after %s measured once its verdict cannot change with 95%% confidence (--early-stop)\n", o.MinStep)
	}
	if o.Class == "auto" {
		fmt.Fprintln(w, "the ladder stops at the first class that fails or cannot be decided")
	}
	if o.WithFaults {
		fmt.Fprintln(w, "then the highest passing class again, under a leader kill and a leader partition")
	}
	return nil
}
