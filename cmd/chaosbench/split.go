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
	cmd.Flags().DurationVar(&o.Wait, "wait", 0, "wait up to this long for every directory to hold its worker's results (a merge Job started beside the workers')")
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

// kubeCommand groups the commands that run chaosbench on a Kubernetes cluster.
func kubeCommand(stdout, stderr io.Writer, code *int) *cobra.Command {
	cmd := &cobra.Command{Use: "kube", Short: "Run chaosbench on a Kubernetes cluster: a split load as an Indexed Job"}
	o := chaosbench.KubeRenderOptions{Workers: 3, Name: "chaosbench", CPU: "1", Memory: "2Gi", Storage: "10Gi"}
	render := &cobra.Command{
		Use:   "render --workers N --config SCENARIO.yaml --endpoints URLS",
		Short: "Print the manifests that run a scenario split over N worker pods and merge their results",
		Long: "Render prints a ConfigMap (the scenario), a headless Service (worker 0's reference clock), a claim\n" +
			"for the results, an Indexed Job of N workers (one share each, spread over nodes, never retried) and a\n" +
			"Job that waits for their results and merges them: its exit code is the merged run's outcome.",
		Example: `  chaosbench kube render --workers 3 --config docs/examples/split-kube.yaml --endpoints https://etcd-0.etcd:2379 \
    --tls-secret etcd-client --image registry.example.com/chaosbench:v1 > split.yaml
  kubectl apply -f split.yaml && kubectl wait --for=condition=complete --timeout=24h job/chaosbench-merge
  kubectl logs job/chaosbench-merge`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			err := chaosbench.KubeRender(o, stdout)
			*code = chaosbench.ExitCode(err)
			return err
		},
	}
	fs := render.Flags()
	fs.IntVar(&o.Workers, "workers", o.Workers, "worker pods: the load is split into this many shares")
	fs.StringVar(&o.Config, "config", "", "the scenario file (YAML, run's flag names as keys)")
	fs.StringSliceVar(&o.Endpoints, "endpoints", nil, "the etcd cluster under test, as the pods reach it (default: the scenario's)")
	fs.StringVar(&o.TLSSecret, "tls-secret", "", "Secret with ca.crt, tls.crt and tls.key for etcd's mutual TLS")
	fs.StringVar(&o.Image, "image", "", "the chaosbench image (default: the image `chaosbench image build` makes; push it where the cluster pulls from)")
	fs.StringVar(&o.Name, "name", o.Name, "name of the objects (and prefix of the Jobs')")
	fs.StringVar(&o.Namespace, "namespace", "", "namespace of the objects (default: kubectl's)")
	fs.StringVar(&o.CPU, "cpu", o.CPU, "CPU request and limit of each worker")
	fs.StringVar(&o.Memory, "memory", o.Memory, "memory request and limit of each worker")
	fs.StringVar(&o.Storage, "storage", o.Storage, "size of the results claim (ReadWriteMany)")
	fs.StringVar(&o.StorageClass, "storage-class", "", "storage class of the results claim")
	fs.StringVar(&o.ResultsClaim, "results-claim", "", "an existing ReadWriteMany claim for the results (none is rendered)")
	fs.DurationVar(&o.MergeWait, "merge-wait", 0, "how long the merge Job waits for every worker's results; a share that has not come is missing and fails the merge (default: warmup + duration + 10m)")
	cmd.AddCommand(render, kubeLocalCommand(stdout, stderr, code))
	return cmd
}

// kubeLocalCommand groups `kube local up` and `kube local down`: a one-node Kubernetes on this machine.
func kubeLocalCommand(stdout, stderr io.Writer, code *int) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "local",
		Short: "A one-node Kubernetes on this machine (real kubelet, containerd, CoreDNS) to run the rendered Jobs on",
	}
	var o chaosbench.KubeLocalOptions
	up := &cobra.Command{
		Use:   "up",
		Short: "Start a one-node Kubernetes here and keep it until interrupted (then remove every trace of it)",
		Long: "Up builds what is missing (the control plane, kubelet, kubectl and CoreDNS of --kube-version from the Go\n" +
			"module proxy, chaosbench's image), then starts an etcd member for the control plane, containerd (its own\n" +
			"root and socket), the kubelet, CoreDNS on the pods' bridge and a volume for results claims, imports\n" +
			"chaosbench's image into the node (pods run it as named; nothing is pulled) and prints the kubeconfig.\n" +
			"Interrupted, it removes the node: processes, mounts, bridge, cgroups and --dir. Needs root, containerd,\n" +
			"runc and the CNI plugins (Debian: containerd runc containernetworking-plugins) and a Docker engine.",
		Example: `  chaosbench kube local up &                          # prints: export KUBECONFIG=...
  chaosbench cluster --cluster docker --members 1 &   # an etcd the pods reach
  chaosbench kube render --workers 3 --config docs/examples/split-local.yaml --endpoints http://172.18.0.2:2379 \
    --cpu 400m --memory 512Mi --storage 1Gi > split-job.yaml
  kubectl apply -f split-job.yaml && kubectl wait --for=condition=complete --timeout=10m job/chaosbench-merge`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			ctx, cancel := interruptible(stderr, "removing the local node")
			defer cancel()
			err := chaosbench.KubeLocalUp(ctx, o, chaosbench.Env{Version: chaosbenchVersion, Command: os.Args, Out: stdout})
			*code = chaosbench.ExitCode(err)
			return err
		},
	}
	up.Flags().StringVar(&o.Dir, "dir", chaosbench.DefaultKubeLocalDir(), "directory of everything the node keeps (removed when it stops)")
	up.Flags().StringVar(&o.KubeVersion, "kube-version", chaosbench.DefaultKubeVersion, "Kubernetes release of the control plane and the kubelet")
	up.Flags().StringSliceVar(&o.Images, "image", nil, "more local Docker images to import into the node")
	var dir string
	down := &cobra.Command{
		Use:   "down",
		Short: "Remove what a killed `kube local up` left: processes, mounts, bridge, cgroups, directory",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			err := chaosbench.KubeLocalDown(dir, stdout)
			*code = chaosbench.ExitCode(err)
			return err
		},
	}
	down.Flags().StringVar(&dir, "dir", chaosbench.DefaultKubeLocalDir(), "the node's directory")
	cmd.AddCommand(up, down)
	return cmd
}
