package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/etcd-chaosbench/chaosbench"
)

func trendCommand(stdout io.Writer, code *int) *cobra.Command {
	var opts chaosbench.TrendOptions
	var gate string
	minEffect := 100 * chaosbench.DefaultMinEffect
	cmd := &cobra.Command{
		Use:   "trend DIR...",
		Short: "Follow nightly results night by night and flag a regression of the latest night",
		Long: `Reads a series of nights: suite directories (suite.json), run directories (summary.json), or
directories holding them (a downloaded artifact history), ordered by their start time. Per scenario it
tabulates, night by night, the etcd and chaosbench versions, the outcome and check verdicts, and every
figure chaosbench compare measures (p50/p99/p99.9 and throughput per operation, availability gaps, etcd's
fsync and commit p99, leader changes), and judges the latest night against the nights before it: worse or
better when it lies beyond their 95% prediction interval (Student's t on the log scale, Holm's adjustment
over the scenario's figures) by more than --min-effect. Writes trend.json, trend.md and trend.html, with
each night's scenarios counted by outcome and the known issues they met.
The outcome, and the exit code, are the latest night's runs' own (a violation in one is exit 4, with or
without a gate) and, with --fail-on-regression, the gate's: a regression exits 3 and names the figure, a
gated figure the trend cannot call yet (fewer than 3 previous nights, or no figure in the latest night)
exits 1. Figures that are not gated are informational.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			opts.Dirs = args
			var err error
			if err = gateArgs(gate, args); err == nil {
				opts.FailOnRegression, opts.RegressionFigures, err = chaosbench.ParseGate(gate)
			}
			if err == nil {
				opts.MinEffect = minEffect / 100
				err = chaosbench.Trend(opts, stdout)
			}
			*code = chaosbench.ExitCode(err)
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.Out, "out", "", "directory for trend.json, trend.md and trend.html (default results/<time>-trend)")
	bindGateFlags(fs, &gate, &minEffect)
	return cmd
}
