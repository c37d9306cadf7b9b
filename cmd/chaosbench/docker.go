package main

import (
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"

	"github.com/spf13/cobra"
	tclog "github.com/testcontainers/testcontainers-go/log"

	"github.com/etcd-chaosbench/chaosbench"
)

// quietTestcontainers keeps testcontainers-go's banner and container chatter off chaosbench's output;
// each docker cluster logs its own events to docker.log in the run directory.
func quietTestcontainers() {
	tclog.SetDefault(tclog.NewNoopLogger())
}

func imageCommand(stdout, stderr io.Writer, code *int) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "image",
		Short: "Build and list the etcd images (and binaries) that docker clusters and --etcd-version use",
	}
	opts := chaosbench.ImagesOptions{Versions: "builtin", Out: stdout}
	build := &cobra.Command{
		Use:   "build",
		Short: "Build etcd releases from the Go module proxy (cached) and their FROM scratch images",
		Example: `  chaosbench image build --etcd-version v3.6.16
  chaosbench image build --etcd-version v3.4.13,v3.5.35,builtin
  chaosbench image build --etcd-version v3.5.35 --binary-only   # no Docker needed: for --cluster embed
  chaosbench image build --etcd-version v3.6.16 --failpoints --binary-only   # and list its failpoints`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			ctx, cancel := interruptible(stderr, "stopping the build")
			defer cancel()
			_, err := chaosbench.BuildImages(ctx, opts)
			*code = chaosbench.ExitCode(err)
			if ctx.Err() != nil {
				*code = outcome.ExitInterrupted
			}
			return err
		},
	}
	build.Flags().StringVar(&opts.Versions, "etcd-version", opts.Versions, "etcd releases to build, comma-separated: v3.6.16, v3.5.35, v3.4.13, ..., or builtin (the etcd linked into chaosbench)")
	build.Flags().BoolVar(&opts.BinaryOnly, "binary-only", false, "build the etcd binaries only (no Docker needed)")
	build.Flags().BoolVar(&opts.Failpoints, "failpoints", false, "build the releases with gofail failpoints (as run --failpoints uses them) and list each one's failpoints")
	list := &cobra.Command{
		Use:   "list",
		Short: "List chaosbench's local images",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			err := chaosbench.ListImages(cmd.Context(), stdout)
			*code = chaosbench.ExitCode(err)
			return err
		},
	}
	cmd.AddCommand(build, list, kubeImageCommand(stdout, stderr, code))
	return cmd
}

// kubeImageCommand builds a Kubernetes control plane and KWOK into the build cache, for --workload
// controlplane and chaosbench fidelity (.ci/run warms the cache with it).
func kubeImageCommand(stdout, stderr io.Writer, code *int) *cobra.Command {
	version := chaosbench.DefaultKubeVersion
	cmd := &cobra.Command{
		Use:     "kube",
		Short:   "Build kube-apiserver, kube-controller-manager, kube-scheduler and KWOK from the Go module proxy (cached)",
		Example: "  chaosbench image kube --kube-version " + chaosbench.DefaultKubeVersion,
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			ctx, cancel := interruptible(stderr, "stopping the build")
			defer cancel()
			err := chaosbench.BuildKube(ctx, version, stdout)
			*code = chaosbench.ExitCode(err)
			if ctx.Err() != nil {
				*code = outcome.ExitInterrupted
			}
			return err
		},
	}
	cmd.Flags().StringVar(&version, "kube-version", version, "Kubernetes release to build (1.33 or later, as the module proxy serves them)")
	return cmd
}

func cleanCommand(stdout, stderr io.Writer, code *int) *cobra.Command {
	opts := chaosbench.CleanOptions{Out: stdout}
	cmd := &cobra.Command{
		Use:   "clean",
		Short: "Remove the containers and networks that crashed or killed chaosbench runs left behind",
		Long: `Remove every container, network and volume labelled by chaosbench whose owning chaosbench process is
gone. Objects of runs that are still running are kept (and listed) unless --all is given. --images also
removes chaosbench's images, --cache the cached etcd binaries.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			err := chaosbench.Clean(cmd.Context(), opts)
			*code = chaosbench.ExitCode(err)
			return err
		},
	}
	cmd.Flags().BoolVar(&opts.All, "all", false, "also remove the objects of chaosbench runs that are still running")
	cmd.Flags().BoolVar(&opts.Images, "images", false, "also remove chaosbench's images")
	cmd.Flags().BoolVar(&opts.Cache, "cache", false, "also remove the cached etcd binaries")
	return cmd
}

func compareCommand(stdout, stderr io.Writer, code *int) *cobra.Command {
	s := chaosbench.DefaultScenario()
	var config string
	var flagSets []string
	rounds := "auto"
	maxRounds := chaosbench.DefaultMaxRounds
	var gate string
	var cooldown time.Duration
	var acrossHosts bool
	minEffect := 100 * chaosbench.DefaultMinEffect
	cmd := &cobra.Command{
		Use:   "compare",
		Short: "Run one scenario on several etcd versions or settings, with the same seed, and compare them side by side",
		Example: `  chaosbench compare --cluster docker --etcd-version v3.5.35,v3.6.16 --workload txn-mixed --duration 30s
  chaosbench compare --etcd-flag-set "" --etcd-flag-set "snapshot-count=5000 heartbeat-interval=50"
  chaosbench compare --etcd-version v3.5.35,v3.5.35+v3.5.35+v3.6.16 --members 3
  chaosbench compare --cluster docker --etcd-version v3.5.35,v3.6.16 --member-cpus 1 --rounds 3
  chaosbench compare --etcd-version v3.5.35,v3.6.16 --rounds 5 --cooldown 30s --fail-on-regression=put:p99,put:throughput`,
		Long: `Runs one scenario on each variant (etcd versions, flag sets) and compares them: for every figure
(each operation's p50, p99, p99.9, throughput and error rate, fault write gaps, etcd's fsync, commit and
leader changes) the change of each variant against the first with a 95% interval, and a verdict: better,
worse, no difference, or undecided with the rounds that would decide it. --rounds N runs the variants N
times in ABBA order, a new seed per round; with one round, intervals come from the runs' per-second
samples and cover the noise within a run only. The outcome, written in compare.json and leading compare.md
and compare.html, and the exit code, are every run's own outcome with the gate's: a violation or a crashed
member in any run is exit 4. --fail-on-regression makes figures part of it: a gated figure that is worse
exits 3, one that is undecided exits 1; figures that are not gated are informational.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := gateArgs(gate, args); err != nil {
				return err
			}
			return cobra.NoArgs(cmd, args)
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			if config != "" {
				if err := chaosbench.LoadScenarioFile(config, cmd.Flags()); err != nil {
					*code = outcome.ExitUsage
					return err
				}
			}
			if err := chaosbench.CheckApplicable(s.Workload, cmd.Flags(), config); err != nil {
				*code = outcome.ExitUsage
				return err
			}
			n, err := parseRounds(rounds)
			if err != nil {
				*code = outcome.ExitUsage
				return err
			}
			opts := chaosbench.CompareOptions{Scenario: s, FlagSets: flagSets, Rounds: n, MaxRounds: maxRounds, MinEffect: minEffect / 100, Cooldown: cooldown, AcrossHosts: acrossHosts}
			if opts.FailOnRegression, opts.RegressionFigures, err = chaosbench.ParseGate(gate); err != nil {
				*code = outcome.ExitUsage
				return err
			}
			if s.EtcdVersion != "" {
				opts.Versions = strings.Split(s.EtcdVersion, ",")
				opts.Scenario.EtcdVersion = ""
			}
			ctx, cancel := interruptible(stderr, "stopping the load and the cluster, writing partial results")
			defer cancel()
			env := chaosbench.Env{Version: chaosbenchVersion, Command: os.Args, Out: stdout}
			if s.DryRun {
				err = chaosbench.ComparePlan(ctx, opts, env)
				*code = chaosbench.ExitCode(err)
				return err
			}
			_, err = chaosbench.Compare(ctx, opts, env)
			*code = chaosbench.ExitCode(err)
			return err
		},
	}
	cmd.Flags().StringVar(&config, "config", "", "scenario file (YAML, keys are the flags' names); flags given here override it")
	chaosbench.BindFlags(cmd.Flags(), &s)
	cmd.Flags().Lookup("etcd-version").Usage = "the variants' etcd versions, comma-separated, e.g. v3.5.35,v3.6.16; " +
		"one variant's members separated by +, e.g. v3.5.35+v3.5.35+v3.6.16"
	cmd.Flags().Lookup("dry-run").Usage = "print the variants, the rounds with their seeds and a run's plan, and start (and build) nothing"
	cmd.Flags().StringArrayVar(&flagSets, "etcd-flag-set", nil, `a variant's etcd settings, space-separated name=value (repeatable; "" for etcd's defaults); with --etcd-version, every version runs with every set`)
	cmd.Flags().StringVar(&rounds, "rounds", rounds, "runs per variant, in ABBA order (A B, B A, ...), each round with a seed of its own: a number, or auto to add rounds until every gated figure (without a gate, every headline figure) is decided by the sequential rule (docs/compare.md), from 3 to --max-rounds")
	cmd.Flags().IntVar(&maxRounds, "max-rounds", maxRounds, "the most rounds --rounds auto runs")
	cmd.Flags().DurationVar(&cooldown, "cooldown", 0, "pause between consecutive runs, for the machine to settle (e.g. 30s)")
	bindGateFlags(cmd.Flags(), &gate, &minEffect)
	cmd.Flags().BoolVar(&acrossHosts, "across-hosts", false, "the variants run on different machines on purpose: note it instead of warning")
	cmd.Flags().SortFlags = false
	return cmd
}

// parseRounds reads --rounds: "auto" (0) or a number of rounds, at least 1.
func parseRounds(s string) (int, error) {
	if s == "auto" {
		return 0, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, outcome.Usagef("--rounds %s: auto or at least 1", s)
	}
	return n, nil
}
