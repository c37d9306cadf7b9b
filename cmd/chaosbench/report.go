package main

import (
	"io"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/etcd-chaosbench/chaosbench"
	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// bindGateFlags defines a comparison's verdict settings: the practical threshold and the regression gate.
func bindGateFlags(fs *pflag.FlagSet, gate *string, minEffect *float64) {
	fs.Float64Var(minEffect, "min-effect", *minEffect, "smallest change in percent that counts: a smaller one is no difference even when significant")
	fs.StringVar(gate, "fail-on-regression", "", "make figures part of the outcome: a variant significantly worse by more than --min-effect exits 3, "+
		"a figure that cannot be decided exits 1 (undecided is never a pass); alone for every figure, or with figures: "+
		"--fail-on-regression=create/pods:p99,put:p99 (an operation alone: all its figures)")
	fs.Lookup("fail-on-regression").NoOptDefVal = "all"
}

// gateArgs explains positional arguments after a bare --fail-on-regression: its figures need "=".
func gateArgs(gate string, args []string) error {
	if gate == "all" && len(args) > 0 && strings.Contains(args[0], ":") {
		return outcome.Usagef("--fail-on-regression %s: write the figures with =, as in --fail-on-regression=%s", args[0], args[0])
	}
	return nil
}

func reportCommand(stdout io.Writer, code *int) *cobra.Command {
	var opts chaosbench.ReportOptions
	var gate string
	var minEffect float64
	cmd := &cobra.Command{
		Use:   "report DIR [DIR...]",
		Short: "Re-render a run's report (report.html, report.md, junit.xml, perfdash.json), or compare runs",
		Long: `With one run directory, re-renders its report from the files the run wrote, judging it by the
thresholds it ran with or by --threshold; exits with the run's outcome (3 when a threshold fails).
summary.json is not changed.

With several, compares them against the first (the baseline) with the comparison engine of chaosbench
compare: each figure's change with a 95% interval and a verdict (better, worse, no difference, undecided),
and writes comparison.md and comparison.html. A variant's rounds are given as one argument, its run
directories separated by commas (base/r1,base/r2,base/r3 new/r1,new/r2,new/r3). The comparison's outcome,
and the exit code, are every run's own outcome with the gate's: a violation in any run is exit 4, with or
without a gate; with --fail-on-regression, a gated figure that is worse fails it (3) and one that is
undecided leaves it undecided (1). Figures that are not gated are informational.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			opts.Dirs = args
			var err error
			if opts.FailOnRegression, opts.RegressionFigures, err = chaosbench.ParseGate(gate); err != nil {
				*code = chaosbench.ExitCode(err)
				return err
			}
			opts.MinEffect = minEffect / 100
			err = chaosbench.Report(opts, stdout)
			*code = chaosbench.ExitCode(err)
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringArrayVar(&opts.Thresholds, "threshold", nil, "judge the run by this threshold instead of its own (repeatable): "+chaosbench.ThresholdGrammar)
	fs.StringSliceVar(&opts.Labels, "label", nil, "names of the runs in a comparison, in order (default: directory names)")
	fs.StringVar(&opts.Out, "out", "", "directory for a comparison (default results/<time>-compare)")
	minEffect = 100 * chaosbench.DefaultMinEffect
	bindGateFlags(fs, &gate, &minEffect)
	fs.StringVar(&opts.Bundle, "bundle", "", "also write a .tar.gz of the report (or comparison), the runs' summaries, series and histograms and how to re-run them; never TLS keys or secrets")
	fs.BoolVar(&opts.Redact, "redact", false, "replace the clusters' endpoints in the bundle by endpoint-1, endpoint-2, ...")
	fs.BoolVar(&opts.AcrossHosts, "across-hosts", false, "the runs were measured on different machines on purpose: note it instead of warning")
	return cmd
}
