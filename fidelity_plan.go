package chaosbench

import (
	"context"
	"fmt"
	"io"
	"path/filepath"

	"github.com/etcd-chaosbench/chaosbench/workloads/kubeapi"
)

// FidelityPlan prints what Fidelity would run, each side's run plan as `chaosbench run --dry-run` prints
// it, and starts and builds nothing.
func FidelityPlan(ctx context.Context, opts FidelityOptions, env Env) error {
	if err := ValidateFidelity(opts); err != nil {
		return err
	}
	opts.setDefaults()
	if env.Out == nil {
		env.Out = io.Discard
	}
	fmt.Fprintf(env.Out, "fidelity (dry run): the kube workload, then a real control plane, at the %s preset for %s each on a fresh %d-member cluster; results would go to %s\n",
		opts.Preset, opts.Duration, opts.Members, opts.Out)
	for _, wl := range []string{"kube", kubeapi.Name} {
		fmt.Fprintf(env.Out, "\n=== %s\n", wl)
		if opts.FromProfile && wl == "kube" {
			fmt.Fprintf(env.Out, "after the control plane: the kube workload from its profile (%s), read from its own metrics\n", filepath.Join(opts.Out, ProfileFile))
			continue
		}
		s := fidelityScenario(opts, wl)
		s.DryRun = true
		if _, err := Run(ctx, s, env); err != nil {
			return err
		}
	}
	return nil
}
