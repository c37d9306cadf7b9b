package main

import (
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/etcd-chaosbench/chaosbench"
	"github.com/etcd-chaosbench/chaosbench/outcome"
)

func suiteCommand(stdout, stderr io.Writer, code *int) *cobra.Command {
	var opts chaosbench.SuiteOptions
	var dryRun, affected, fixed bool
	cmd := &cobra.Command{
		Use:   "suite DIR|FILE...",
		Short: "Run a suite of named scenarios (scenario files with a suite: block), one verdict each and one for all",
		Long: `Suite runs the scenario files given (directories: their *.yaml files), selected by --tags, --only and
--shard, one after the other, each in its own run directory under --out, and writes suite.json, junit.xml,
suite.md and suite.html there. Each scenario's verdict is its run's outcome; the suite's is the most severe
of them (a violation anywhere makes the suite a violation) and decides the exit code. Every scenario that
did not pass prints the command that replays it.

A regression scenario names the etcd bug it reproduces in its suite block (issue, affected, expect, fixed).
With --affected each runs on the release that had its bug and passes only when it catches it with the kind
of finding it expects; with --fixed each runs on the release that fixed it and must pass as any scenario.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			opts.Paths = args
			switch {
			case affected && fixed:
				err := outcome.Usagef("--affected and --fixed: one release of each bug at a time")
				*code = chaosbench.ExitCode(err)
				return err
			case affected:
				opts.Release = chaosbench.ReleaseAffected
			case fixed:
				opts.Release = chaosbench.ReleaseFixed
			}
			ctx, cancel := interruptible(stderr, "stopping the current scenario; the rest are not run")
			defer cancel()
			if dryRun {
				err := chaosbench.SuitePlan(ctx, opts, chaosbench.Env{Version: chaosbenchVersion, Command: os.Args, Out: stdout})
				*code = chaosbench.ExitCode(err)
				return err
			}
			_, err := chaosbench.Suite(ctx, opts, chaosbench.Env{Version: chaosbenchVersion, Command: os.Args, Out: stdout})
			*code = chaosbench.ExitCode(err)
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.Out, "out", "", "suite directory, one run directory per scenario under it (default results/<time>-suite)")
	fs.StringSliceVar(&opts.Tags, "tags", nil, "run the scenarios having any of these tags (e.g. nightly, smoke)")
	fs.StringSliceVar(&opts.Only, "only", nil, "run only the scenarios of these names")
	fs.StringVar(&opts.Shard, "shard", "", "I/N: run the I-th of N shards of the selected scenarios (by name, round robin)")
	fs.Int64Var(&opts.Seed, "seed", 0, "seed for every scenario (0: each scenario's seed policy: fresh, printed and stored, or fixed)")
	fs.StringArrayVar(&opts.Set, "set", nil, "name=value: a setting of chaosbench run for every scenario, over its file (repeatable), e.g. etcd-version=v3.5.21")
	fs.BoolVar(&opts.RetryHarness, "retry-harness", false, "retry a scenario once when its outcome is a harness error (never a violation, a failed threshold or an undecided check)")
	fs.BoolVar(&opts.List, "list", false, "print the selected scenarios and run nothing")
	fs.BoolVar(&affected, "affected", false, "run the regression scenarios (suite: affected) each on the etcd release that had its bug, where it must be caught with the kind of finding it expects")
	fs.BoolVar(&fixed, "fixed", false, "run the regression scenarios each on the etcd release that fixed its bug, where it must pass")
	fs.BoolVar(&dryRun, "dry-run", false, "print each selected scenario's run plan (as run --dry-run does) and start nothing")
	return cmd
}
