package chaosbench

import (
	"context"
	"fmt"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/results/compare"
)

// ComparePlan prints what Compare would run: the variants, the rounds in their order with their seeds, and
// the run plan of the first variant (every variant runs the same scenario). It checks every variant as
// Compare does before its first run, but builds no release and starts nothing: a release's own flag
// parser is consulted only when it is built.
func ComparePlan(ctx context.Context, opts CompareOptions, env Env) error {
	dir, err := opts.setDefaults()
	if err != nil {
		return err
	}
	vs, err := opts.variants(dir)
	if err != nil {
		return err
	}
	for _, v := range vs {
		v.scenario.Out = v.dir
		if err := v.scenario.validate(); err != nil {
			return fmt.Errorf("variant %s: %w", v.label, err)
		}
	}
	labels := make([]string, len(vs))
	for i, v := range vs {
		labels[i] = v.label
	}
	if opts.auto() {
		fmt.Fprintf(env.Out, "compare (dry run): %d variants of %s, rounds auto: %d to %d rounds (%d to %d runs), stopping when every %s figure is decided; results would go to %s\n",
			len(vs), opts.Scenario.DisplayName(), compare.DefaultMinRounds, opts.MaxRounds, len(vs)*compare.DefaultMinRounds, len(vs)*opts.MaxRounds,
			map[bool]string{true: "gated", false: "headline"}[opts.FailOnRegression], dir)
	} else {
		fmt.Fprintf(env.Out, "compare (dry run): %d variants of %s, %d round(s), %d runs; results would go to %s\n",
			len(vs), opts.Scenario.DisplayName(), opts.Rounds, len(vs)*opts.Rounds, dir)
	}
	for _, v := range vs {
		fmt.Fprintf(env.Out, "  variant %s: %s\n", v.label, v.dir)
	}
	for i, r := range roundPlan(labels, opts.planned(), opts.Scenario.Seed) {
		fmt.Fprintf(env.Out, "  round %d, seed %d: %s\n", i+1, r.Seed, strings.Join(r.Order, ", "))
	}
	fmt.Fprintf(env.Out, "\neach run (variant %s shown):\n", vs[0].label)
	s := vs[0].scenario
	s.Out, s.Seed, s.DryRun = vs[0].dir, opts.Scenario.Seed, true
	_, err = Run(ctx, s, env)
	return err
}
