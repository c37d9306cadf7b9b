package main

import (
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/etcd-chaosbench/chaosbench"
	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// mergeCommand merges the run directories of a split load's workers.
func mergeCommand(stdout, stderr io.Writer, code *int) *cobra.Command {
	var o chaosbench.MergeOptions
	cmd := &cobra.Command{
		Use:   "merge DIR... --out DIR",
		Short: "Merge the run directories of a split load's workers into one run, checked and judged as one",
		Long: "Merge merges the results of every worker of a load split with --workers (a Kubernetes Indexed Job, or\n" +
			"containers or processes started elsewhere) into one run directory: histograms, series, errors, fault\n" +
			"windows and histories, each worker's operations placed on one timeline by its measured clock offset\n" +
			"and widened by its uncertainty. The consistency checks run on the merged history, the scenario's\n" +
			"thresholds on the merged figures; the exit code is the merged run's outcome.",
		Args: cobra.MinimumNArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			o.Dirs = args
			ctx, cancel := interruptible(stderr, "stopping the merge")
			defer cancel()
			_, err := chaosbench.Merge(ctx, o, stdout)
			*code = chaosbench.ExitCode(err)
			return err
		},
	}
	cmd.Flags().StringVar(&o.Out, "out", "", "the merged run directory (required)")
	cmd.Flags().StringVar(&o.Observer, "observer", "", "the coordinator's own run when every worker ran in a container (DIR/workers/observer): the fault windows, etcd's metrics and the members check come from it")
	cmd.Flags().DurationVar(&o.AssumeUncertainty, "clock-uncertainty", 0, "how far the clocks of workers run with --start-at (not measured against a reference) may be off; their operations are widened by it")
	return cmd
}

// splitWorkerCommand is the hidden mode in which a coordinator runs one worker of a split load.
func splitWorkerCommand(stdout, stderr io.Writer, code *int) *cobra.Command {
	return &cobra.Command{
		Use:    chaosbench.SplitWorkerCommand + " SCENARIO.json",
		Short:  "Run one worker of a split load (internal: started by chaosbench run --workers)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			ctx, cancel := interruptible(stderr, "stopping this worker's load, writing partial results")
			defer cancel()
			_, err := chaosbench.RunScenarioFile(ctx, args[0], chaosbench.Env{Version: chaosbenchVersion, Command: os.Args, Out: stdout})
			*code = chaosbench.ExitCode(err)
			return err
		},
	}
}

// useWorkerIndex gives --worker from Kubernetes' JOB_COMPLETION_INDEX when the load is split and the flag
// was not given.
func useWorkerIndex(s *chaosbench.Scenario, cmd *cobra.Command, code *int) error {
	if err := s.UseWorkerIndex(os.LookupEnv, cmd.Flags().Changed("worker")); err != nil {
		*code = outcome.ExitUsage
		return err
	}
	return nil
}
