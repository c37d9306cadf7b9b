package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/etcd-chaosbench/chaosbench"
	"github.com/etcd-chaosbench/chaosbench/results/report"
)

func reportCommand(stdout io.Writer, code *int) *cobra.Command {
	var opts chaosbench.ReportOptions
	cmd := &cobra.Command{
		Use:   "report DIR [DIR...]",
		Short: "Re-render a run's report (report.html, report.md, junit.xml, perfdash.json), or compare runs",
		Long: `With one run directory, re-renders its report from the files the run wrote, judging it by the
thresholds it ran with or by --threshold; exits 3 when a threshold fails. summary.json is not changed.

With several, compares them per operation and percentile against the first (the baseline), calling a change
better or worse only when it exceeds the run-to-run noise, and writes comparison.md and comparison.html.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			opts.Dirs = args
			err := chaosbench.Report(opts, stdout)
			*code = chaosbench.ExitCode(err)
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringArrayVar(&opts.Thresholds, "threshold", nil, "judge the run by this threshold instead of its own (repeatable): "+report.ThresholdGrammar)
	fs.StringSliceVar(&opts.Labels, "label", nil, "names of the runs in a comparison, in order (default: directory names)")
	fs.StringVar(&opts.Out, "out", "", "directory for a comparison (default results/<time>-compare)")
	return cmd
}
