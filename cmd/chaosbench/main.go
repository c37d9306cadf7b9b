// Command chaosbench benchmarks etcd and checks it under faults. Every subcommand parses its flags into an
// options struct and calls one library function; exit codes are documented in docs/outcomes.md.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"syscall"

	"github.com/etcd-chaosbench/chaosbench/outcome"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/api/v3/version"

	"github.com/etcd-chaosbench/chaosbench"
)

// chaosbenchVersion is set at build time: go build -ldflags "-X main.chaosbenchVersion=v1.2.3".
var chaosbenchVersion = "dev"

func main() {
	os.Exit(execute(os.Args[1:], os.Stdout, os.Stderr))
}

// execute runs the command line args and returns the exit code.
func execute(args []string, stdout, stderr io.Writer) int {
	var code int
	root := newRoot(stdout, stderr, &code)
	root.SetArgs(args)
	if err := root.Execute(); err != nil {
		if code == outcome.ExitOK {
			// Commands set their own code; an error without one is cobra's: unknown command or flag, bad
			// arguments.
			code = outcome.ExitUsage
		}
		fmt.Fprintln(stderr, "chaosbench:", err)
	}
	return code
}

// newRoot is chaosbench's command tree; each command sets *code when it runs.
func newRoot(stdout, stderr io.Writer, code *int) *cobra.Command {
	root := &cobra.Command{
		Use:   "chaosbench",
		Short: "Benchmark etcd with Kubernetes-like load and check it under faults",
		Long: "chaosbench benchmarks etcd with the requests Kubernetes' apiservers send it, and checks that it stays\n" +
			"correct under faults. Start with `chaosbench run`: a 3-member cluster, the traffic of a 100-node\n" +
			"Kubernetes cluster, a leader kill and a partition, about a minute; its last line is the verdict.\n" +
			"README.md has a recipe for each job; docs/ has the reference.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &outcome.UsageError{Err: err} })
	// Containers and versions (docker.go) log nothing of testcontainers' own.
	quietTestcontainers()
	cobra.EnableCommandSorting = false // each group lists its commands in the order a newcomer needs them
	addGroup(root, jobsGroup, "Jobs (each runs etcd under load and exits with its verdict):",
		runCommand(stdout, stderr, code), qualifyCommand(stdout, stderr, code), suiteCommand(stdout, stderr, code), exploreCommand(stdout, stderr, code),
		compareCommand(stdout, stderr, code), fidelityCommand(stdout, stderr, code))
	addGroup(root, resultsGroup, "Results (read, re-judge, merge and publish what jobs wrote):",
		reportCommand(stdout, code), checkCommand(stdout, stderr, code), trendCommand(stdout, code),
		mergeCommand(stdout, stderr, code), historyCommand(stdout, code))
	addGroup(root, setupGroup, "Setup (what jobs run on):",
		imageCommand(stdout, stderr, code), clusterCommand(stdout, stderr, code), kubeCommand(stdout, stderr, code), profileCommand(stdout, stderr, code),
		cleanCommand(stdout, stderr, code), versionCommand(stdout))
	// The helper processes chaosbench re-executes itself as (etcd member, docker watchdog, slowfs, a split
	// load's worker): hidden, in no group.
	for _, h := range chaosbench.HiddenCommands() {
		root.AddCommand(hiddenCommand(h, code))
	}
	root.AddCommand(splitWorkerCommand(stdout, stderr, code))
	root.SetHelpCommandGroupID(setupGroup)
	root.SetCompletionCommandGroupID(setupGroup)
	return root
}

// The groups of `chaosbench --help`, in what a user comes for: a job that decides something, the results
// jobs wrote, or setting up what jobs run on.
const (
	jobsGroup    = "jobs"
	resultsGroup = "results"
	setupGroup   = "setup"
)

// addGroup adds a command group to root and its commands, in the order given.
func addGroup(root *cobra.Command, id, title string, cmds ...*cobra.Command) {
	root.AddGroup(&cobra.Group{ID: id, Title: title})
	for _, c := range cmds {
		c.GroupID = id
		root.AddCommand(c)
	}
}

func runCommand(stdout, stderr io.Writer, code *int) *cobra.Command {
	s := chaosbench.DefaultScenario()
	var config, cpuProfile, replay string
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Start (or connect to) a cluster, run a workload and write the results",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if replay != "" {
				// A recorded run's settings (replay.go); flags given here override them.
				if err := replayInto(&s, replay, config, cmd.Flags()); err != nil {
					*code = outcome.ExitUsage
					return err
				}
			}
			if config != "" && replay == "" {
				if err := chaosbench.LoadScenarioFile(config, cmd.Flags()); err != nil {
					*code = outcome.ExitUsage
					return err
				}
			}
			if replay == "" {
				// A recorded run's settings hold every field; what is checked is what a user set.
				if err := chaosbench.CheckApplicable(s.Workload, cmd.Flags(), config); err != nil {
					*code = outcome.ExitUsage
					return err
				}
			}
			// etcdctl's ETCDCTL_* variables stand in for the external cluster's flags, and Kubernetes'
			// JOB_COMPLETION_INDEX for --worker.
			if err := s.UseEnvironment(os.LookupEnv); err != nil {
				*code = outcome.ExitUsage
				return err
			}
			if err := useWorkerIndex(&s, cmd, code); err != nil {
				return err
			}
			stop, err := startCPUProfile(cpuProfile)
			if err != nil {
				*code = outcome.ExitUsage
				return err
			}
			defer stop()
			// The generator's live heap is small (histograms, buffers) while it allocates per request, so
			// the default GOGC collects several times a second, on CPUs etcd may share. Collect less often.
			debug.SetGCPercent(400)
			ctx, cancel := interruptible(stderr, "stopping the load and the cluster, writing partial results")
			defer cancel()
			_, err = chaosbench.Run(ctx, s, chaosbench.Env{
				Version: chaosbenchVersion, Command: os.Args, Out: stdout,
			})
			*code = chaosbench.ExitCode(err)
			return err
		},
	}
	cmd.Flags().StringVar(&config, "config", "", "scenario file (YAML, keys are these flags' names); flags given here override it")
	cmd.Flags().StringVar(&replay, "replay", "", "run again what a run directory recorded (its settings and seed) into a new directory; flags given here override them")
	chaosbench.BindFlags(cmd.Flags(), &s)
	cmd.Flags().StringVar(&cpuProfile, "cpu-profile", "", "write a CPU profile of chaosbench itself (not of the members) to this file")
	cmd.Flags().SortFlags = false
	return cmd
}

func clusterCommand(stdout, stderr io.Writer, code *int) *cobra.Command {
	s := chaosbench.DefaultScenario()
	cmd := &cobra.Command{
		Use:   "cluster",
		Short: "Start an embedded cluster and keep it running until interrupted (endpoints are printed)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			ctx, cancel := interruptible(stderr, "stopping the cluster")
			defer cancel()
			err := chaosbench.Serve(ctx, s, chaosbench.Env{Version: chaosbenchVersion, Out: stdout})
			*code = chaosbench.ExitCode(err)
			return err
		},
	}
	fs := cmd.Flags()
	fs.IntVar(&s.Members, "members", s.Members, "members: 1, 3 or 5")
	fs.StringArrayVar(&s.EtcdFlags, "etcd-flag", nil, "etcd setting for every member, name=value (repeatable)")
	fs.BoolVar(&s.TLS, "tls", false, "serve clients over mutual TLS (certificates generated in the directory)")
	fs.StringVar(&s.Out, "out", "", "directory for member data and logs (default results/<time>-cluster)")
	chaosbench.BindServeFlags(fs, &s)
	return cmd
}

// interruptible returns a context cancelled by the first SIGINT or SIGTERM; a second one exits at once
// (members die with this process).
func interruptible(stderr io.Writer, what string) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case <-sigs:
		case <-ctx.Done():
			return
		}
		fmt.Fprintf(stderr, "\ninterrupted: %s (interrupt again to quit at once)\n", what)
		cancel()
		<-sigs
		os.Exit(outcome.ExitInterrupted)
	}()
	return ctx, func() {
		signal.Stop(sigs)
		cancel()
	}
}

func checkCommand(stdout, stderr io.Writer, code *int) *cobra.Command {
	var o chaosbench.CheckOptions
	var cpuProfile string
	cmd := &cobra.Command{
		Use:   "check DIR",
		Short: "Check the history recorded in a run directory: linearizability, watch guarantees, serializable reads",
		Long: "Check re-checks a recorded run offline. It prints one verdict per check (ok, violation, unknown), writes\n" +
			"check.json and, for a linearizability violation, linearizability.html (porcupine's visualization of the\n" +
			"failing key, fault windows marked) into DIR. Then it decides the run again with these checks, as the run\n" +
			"decides itself: summary.json (and the report files, when the run has them) are rewritten with the outcome,\n" +
			"and the exit code is that outcome's: 0 ok, 4 a violation (or a member that crashed during the run), 1 a\n" +
			"check that could not decide in time, 3 a threshold the run failed. Without summary.json the checks alone\n" +
			"decide, and nothing else is written. An interrupted check changes nothing.",
		Args: cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			o.Dir, o.Out = args[0], stdout
			stop, err := startCPUProfile(cpuProfile)
			if err != nil {
				*code = outcome.ExitUsage
				return err
			}
			defer stop()
			ctx, cancel := interruptible(stderr, "stopping the check")
			defer cancel()
			_, err = chaosbench.Check(ctx, o)
			*code = chaosbench.ExitCode(err)
			return err
		},
	}
	cmd.Flags().DurationVar(&o.Timeout, "timeout", 0, "time limit; what is not decided in time is unknown, which is not a pass (default 5m)")
	cmd.Flags().StringVar(&cpuProfile, "cpu-profile", "", "write a CPU profile of the check to this file (go tool pprof reads it)")
	return cmd
}

// startCPUProfile starts profiling chaosbench's CPU into path, when it is not empty, and returns what stops
// it. A file that cannot be created is a usage error: nothing has started.
func startCPUProfile(path string) (stop func(), err error) {
	if path == "" {
		return func() {}, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("--cpu-profile: %w", err)
	}
	return func() {
		pprof.StopCPUProfile()
		f.Close()
	}, nil
}

func versionCommand(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the versions of chaosbench and of the etcd it embeds",
		Args:  cobra.NoArgs,
		Run: func(*cobra.Command, []string) {
			fmt.Fprintf(stdout, "chaosbench %s\netcd server (embedded members) %s\netcd client %s\n%s %s/%s\n",
				chaosbenchVersion, version.Version, version.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		},
	}
}

// hiddenCommand is a hidden mode in which chaosbench runs as one of its own helper processes; its
// arguments are not parsed here but handed over as they are (etcd's flags, or the helper's own), and its
// exit code is the process's.
func hiddenCommand(h chaosbench.HiddenCommand, code *int) *cobra.Command {
	use := h.Name
	if h.Args != "" {
		use += " " + h.Args
	}
	return &cobra.Command{
		Use:                use,
		Short:              h.Short,
		Hidden:             true,
		DisableFlagParsing: true,
		Run: func(_ *cobra.Command, args []string) {
			*code = h.Main(args)
		},
	}
}
