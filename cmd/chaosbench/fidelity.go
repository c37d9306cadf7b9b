package main

import (
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcd-chaosbench/chaosbench"
	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// fidelityCommand compares the kube workload with a real control plane at one preset.
func fidelityCommand(stdout, stderr io.Writer, code *int) *cobra.Command {
	opts := chaosbench.FidelityOptions{Preset: "small", Duration: 2 * time.Minute, Members: 1}
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "fidelity",
		Short: "Run the kube workload and a real Kubernetes control plane at one preset and compare what reached etcd",
		Long: `Runs the kube workload, then a real control plane (--workload controlplane) of the same size, each on a
fresh cluster without faults, and compares what etcd received during each load: requests per gRPC method,
MVCC counters, bytes, watchers, keys and value sizes per /registry prefix, and the apiservers' etcd requests
per operation and resource. Writes fidelity.md, fidelity.html and fidelity.json with real/emulated ratios
and a score (the share within ±15%), which are informational. The outcome, and the exit code, are the two
runs' own (a violation or a crashed member in either is exit 4), with fidelity's own problems.`,
		Example: "  chaosbench fidelity --preset small --duration 2m",
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := chaosbench.ValidateFidelity(opts); err != nil {
				*code = outcome.ExitUsage
				return err
			}
			ctx, cancel := interruptible(stderr, "stopping the fidelity runs")
			defer cancel()
			if dryRun {
				err := chaosbench.FidelityPlan(ctx, opts, chaosbench.Env{Version: chaosbenchVersion, Command: os.Args, Out: stdout})
				*code = chaosbench.ExitCode(err)
				return err
			}
			_, err := chaosbench.Fidelity(ctx, opts, chaosbench.Env{Version: chaosbenchVersion, Command: os.Args, Out: stdout})
			*code = chaosbench.ExitCode(err)
			if ctx.Err() != nil {
				*code = outcome.ExitInterrupted
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Preset, "preset", opts.Preset, "kube size preset of both runs: small, medium, large, xlarge")
	f.DurationVar(&opts.Duration, "duration", opts.Duration, "load of each run")
	f.IntVar(&opts.Members, "members", opts.Members, "etcd members of each cluster: 1, 3 or 5")
	f.StringVar(&opts.KubeVersion, "kube-version", "", "Kubernetes release of the real control plane (default the one chaosbench's client-go matches)")
	f.StringVar(&opts.Out, "out", "", "directory for both runs and the comparison (default results/<time>-fidelity-<preset>)")
	f.Int64Var(&opts.Seed, "seed", 0, "seed of both runs; 0 picks one")
	f.BoolVar(&opts.FromProfile, "profile", false, "run the real control plane first, profile it from its own metrics (profile.yaml) and run the kube workload from that profile instead of the preset")
	f.BoolVar(&dryRun, "dry-run", false, "print both runs' plans and start (and build) nothing")
	return cmd
}
