package chaosbench

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
)

// SuitePlan prints what Suite would run, scenario by scenario, with each scenario's own run plan (as
// `chaosbench run --dry-run` prints it), and starts nothing: every selected file is read and checked as
// Suite checks it, so bad input is the same usage error either way. Seeds of a fresh seed policy are
// picked here only to plan; the suite picks its own when it runs.
func SuitePlan(ctx context.Context, opts SuiteOptions, env Env) error {
	if opts.Shard != "" {
		if _, _, err := ParseShard(opts.Shard); err != nil {
			return err
		}
	}
	entries, err := LoadSuite(opts.Paths, opts.Set)
	if err != nil {
		return err
	}
	sel, err := SelectSuite(entries, opts)
	if err != nil {
		return err
	}
	dir := opts.Out
	if dir == "" {
		dir = filepath.Join("results", "<time>-suite")
	}
	fmt.Fprintf(env.Out, "chaosbench suite (dry run): %d of %d scenarios; results would go to %s\n", len(sel), len(entries), dir)
	for i, e := range sel {
		fmt.Fprintf(env.Out, "\n=== [%d/%d] %s (%s): tags %s, seed policy %s\n", i+1, len(sel), e.Name, e.File, strings.Join(e.Tags, ","), e.SeedPolicy)
		s := e.Scenario
		s.Out, s.Seed, s.DryRun = filepath.Join(dir, e.Name), seedFor(e, opts.Seed), true
		if _, err := Run(ctx, s, env); err != nil {
			return fmt.Errorf("%s: %w", e.File, err)
		}
	}
	return nil
}
