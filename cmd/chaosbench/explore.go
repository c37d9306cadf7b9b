package main

import (
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcd-chaosbench/chaosbench"
	"github.com/etcd-chaosbench/chaosbench/outcome"
)

func exploreCommand(stdout, stderr io.Writer, code *int) *cobra.Command {
	opts := chaosbench.ExploreOptions{MaxLoad: time.Minute, Tries: 3}
	cmd := &cobra.Command{
		Use:   "explore",
		Short: "Search random scenarios for a bug; shrink the first one found to a scenario file",
		Long: `Explore runs random scenarios (workload and its shape, cluster size, etcd settings, one to three faults
among kills, pauses, partitions, until-snapshot partitions, compactions, defragmentations and, with
--failpoints, crash failpoints) one after the other on one etcd release, for --count scenarios or --for a
time, and stops at the first run that finds etcd failing: a violation, members disagreeing, a crashed member.
It then shrinks it (fewer faults, a shorter load, fewer clients and keys, a simpler workload), running each
smaller candidate with --tries seeds and keeping it when at least half of them still fail the same way
(a violation, a crashed member), and writes the smallest as found.yaml, ready for ci/chaos/regressions/. A finding attributed to a known upstream issue is reported
and the search goes on. Every choice follows --seed (printed); every run's directory is kept.`,
		Example: `  chaosbench explore --etcd-version v3.5.5 --failpoints --count 20
  chaosbench explore --for 1h --seed 42 --out results/explore-night`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			ctx, cancel := interruptible(stderr, "stopping the search")
			defer cancel()
			_, err := chaosbench.Explore(ctx, opts, chaosbench.Env{Version: chaosbenchVersion, Command: os.Args, Out: stdout})
			*code = chaosbench.ExitCode(err)
			if ctx.Err() != nil {
				*code = outcome.ExitInterrupted
			}
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&opts.EtcdVersion, "etcd-version", "", "etcd release every scenario runs on (default: the builtin one)")
	fs.BoolVar(&opts.Failpoints, "failpoints", false, "run the release's failpoint build and let the search pick failpoint crashes")
	fs.StringVar(&opts.Workload, "workload", "", "draw only this workload (put, txn-put, txn-mixed or watch-latency; default: any); the rest is still drawn")
	fs.Int64Var(&opts.Seed, "seed", 0, "seed of every choice (0 picks one, printed and stored)")
	fs.IntVar(&opts.Count, "count", 0, "stop after this many scenarios")
	fs.DurationVar(&opts.For, "for", 0, "stop once this long has passed (no new scenario starts after it)")
	fs.DurationVar(&opts.MaxLoad, "max-load", opts.MaxLoad, "longest load of a scenario (at least 20s)")
	fs.IntVar(&opts.Tries, "tries", opts.Tries, "seeds each shrinking candidate runs with: it still fails when at least half of them fail as the finding did")
	fs.StringVar(&opts.Out, "out", "", "directory of every run, found.yaml and explore.json (default results/<time>-explore)")
	return cmd
}
