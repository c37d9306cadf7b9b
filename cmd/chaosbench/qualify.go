package main

import (
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/etcd-chaosbench/chaosbench"
)

func qualifyDiskCommand(stdout, stderr io.Writer, code *int) *cobra.Command {
	o := chaosbench.DefaultDiskOptions()
	cmd := &cobra.Command{
		Use:   "disk",
		Short: "Probe a directory's disk with etcd's write patterns (WAL appends, bbolt commits) and judge it by etcd's guidance",
		Long: `disk writes etcd's WAL pattern (sequential 2300 B and 8000 B appends, each followed by fdatasync, in a
preallocated file) and bbolt's (random page writes + fdatasync, then a meta page + fdatasync) under --dir,
at least --size bytes each, and reports the fdatasync percentiles (p50, p99, p99.9, max), IOPS and bytes/s.
It judges them by etcd's guidance (WAL fdatasync p99 < 10 ms with 50 IOPS; 2 ms with 500 IOPS for heavy
load; bbolt commit p99 < 25 ms) and says which size classes the disk allows. Exits 0 when the disk is fit
for etcd, 3 when it is too slow, 2 for bad input.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			o.Out = stdout
			ctx, cancel := interruptible(stderr, "stopping the disk probe")
			defer cancel()
			_, err := chaosbench.QualifyDisk(ctx, o)
			*code = chaosbench.ExitCode(err)
			return err
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.Dir, "dir", o.Dir, "a directory on the disk to judge (a scratch directory is created and removed below it)")
	fs.Int64Var(&o.Size, "size", o.Size, "bytes each pattern writes (fio's etcd test: 22 MiB)")
	fs.DurationVar(&o.MaxTime, "max-time", o.MaxTime, "stop a pattern that takes longer, and say so")
	fs.Int64Var(&o.Seed, "seed", o.Seed, "seed of the bbolt pattern's page offsets and of the data written")
	fs.StringVar(&o.JSON, "json", "", "also write the result to this file (JSON)")
	return cmd
}

func qualifyCommand(stdout, stderr io.Writer, code *int) *cobra.Command {
	o := chaosbench.DefaultQualifyOptions()
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "qualify",
		Short: "Qualify hardware for etcd: disk probe, network probe and a load ladder of Kubernetes size classes",
		Long: `qualify answers "which Kubernetes cluster size can this hardware's etcd carry, and if not, what is too slow?".
It probes the disk under --data-root with etcd's write patterns, then runs the kube workload at the size
classes small (50 nodes), medium (250), large (1000) and xlarge (3000), one step each (--step-duration after
--warmup, open loop, no faults), stopping at the first class that fails. A class passes when the Kubernetes
API SLOs hold (mutating and get p99 <= 1 s, list p99 <= 30 s), etcd stays healthy (WAL fsync p99 < 10 ms,
backend commit p99 < 25 ms, no leader change, throughput >= 90% of the plan), the consistency checks are
clean and the disk probe allows the class. A step whose generator could not keep its schedule is undecided.
The verdict comes first, in one line (the outcome, then what the hardware qualified for), then the table;
qualification.json and qualification.md are written to --out, beside each step's run directory. The exit
code is the outcome of every step of every class climbed, as every chaosbench job decides it: 4 when any
step found a consistency violation or a crashed member (whatever class was asked for), 3 when the requested
class (with auto: small) does not qualify, the network is too slow for the cluster's timeouts or a class
does not hold under --with-faults, 1 when anything could not be decided (a step, the network), 0 when the
requested class qualifies, 2 for bad input.

With --etcdctl-compat it runs etcdctl check perf's put-only loads instead of the ladder and judges them by
check perf's rule, so that its verdict can be laid beside check perf's own.`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if dryRun {
				err := chaosbench.QualifyPlan(o, stdout)
				*code = chaosbench.ExitCode(err)
				return err
			}
			o.Log = stdout
			o.Env = chaosbench.Env{Version: chaosbenchVersion, Command: os.Args}
			ctx, cancel := interruptible(stderr, "stopping the step, writing what was measured")
			defer cancel()
			_, err := chaosbench.Qualify(ctx, o)
			*code = chaosbench.ExitCode(err)
			return err
		},
	}
	fs := cmd.Flags()
	s := &o.Scenario
	fs.StringVar(&o.Out, "out", "", "qualification directory (default results/<time>-qualify); each step's run directory is inside it")
	fs.StringVar(&o.Class, "class", o.Class, "the class to qualify: small, medium, large, xlarge, or auto (climb from small until one fails); with --profile a growth factor such as 2x")
	fs.StringVar(&o.Profile, "profile", "", "climb growth factors of a kube workload profile (chaosbench profile) instead of the preset classes: qualified for Nx this cluster's traffic")
	fs.Float64SliceVar(&o.Growth, "growth", nil, "--profile: the growth factors to climb (default 1,1.5,2,3,4,6,8,12,16)")
	fs.BoolVar(&o.ScaleRates, "scale-rates", false, "--profile: grow the request rates only, not the objects")
	fs.DurationVar(&o.StepDuration, "step-duration", o.StepDuration, "measured load of each step (warm-up excluded)")
	fs.BoolVar(&o.EarlyStop, "early-stop", o.EarlyStop, "end a step after --min-step once its verdict cannot change with 95% confidence (every limit far from its measured interval); the report says which steps ended early and why")
	fs.DurationVar(&o.MinStep, "min-step", o.MinStep, "the least load a step measures before --early-stop may end it")
	fs.DurationVar(&o.Warmup, "warmup", o.Warmup, "warm-up before each step's measured load")
	fs.StringVar(&o.DataRoot, "data-root", "", "embed: keep the members' data on this directory's disk (the disk under test) and probe it (default: the --out directory's disk)")
	fs.BoolVar(&o.DiskProbe, "disk-probe", o.DiskProbe, "probe the members' disk first (embed: the data root, from here; docker: from a container, on the directory the members' data is bind-mounted from)")
	fs.StringArrayVar(&o.DiskResults, "disk-result", nil, "external: a `chaosbench qualify disk --json FILE` result from a member's host, attached and judged (repeatable; the worst decides)")
	fs.Int64Var(&o.DiskSize, "disk-size", chaosbench.DefaultDiskSize, "bytes each disk-probe pattern writes")
	fs.BoolVar(&o.WithFaults, "with-faults", false, "run the highest passing class again with a leader kill and a leader partition; it holds only if writes resume within twice the election timeout and the checks stay clean (3+ members, steps of 30s or more)")
	fs.BoolVar(&o.EtcdctlCompat, "etcdctl-compat", false, "instead of the kube ladder, run etcdctl check perf's put-only loads (s, m, l, xl: 150/1000/8000/15000 writes/s from 50/200/500/1000 clients, 256 B keys, 1 KiB values) and judge them by its rule: FAIL on any error, throughput <= 90% of target, slowest > 0.5 s or stddev > 0.1 s")
	fs.StringVar(&o.CompatLoad, "compat-load", o.CompatLoad, "--etcdctl-compat: the load (etcdctl check perf --load): s, m, l, xl, or auto (climb from s until one fails)")
	fs.DurationVar(&o.CompatDuration, "compat-duration", o.CompatDuration, "length of each --etcdctl-compat load (check perf: 60s)")
	fs.StringVar(&o.Progress, "progress", o.Progress, "each step's progress: auto (bars on a terminal, a line every 15 s otherwise), bars, lines or none")
	fs.BoolVar(&dryRun, "dry-run", false, "print the disk probe and the steps the qualification would run, and start nothing")
	fs.Int64Var(&s.Seed, "seed", 0, "seed for every random choice; 0 picks one (printed and stored)")
	fs.StringVar(&s.Cluster, "cluster", s.Cluster, "cluster backend: embed, docker or external")
	fs.IntVar(&s.Members, "members", s.Members, "members of an embedded or docker cluster: 1, 3 or 5")
	fs.StringArrayVar(&s.EtcdFlags, "etcd-flag", nil, "etcd setting for every member, name=value (repeatable)")
	fs.StringSliceVar(&s.Endpoints, "endpoints", nil, "client URLs of an external cluster")
	fs.StringVar(&s.CACert, "cacert", "", "CA bundle of an external cluster")
	fs.StringVar(&s.Cert, "cert", "", "client certificate for mutual TLS")
	fs.StringVar(&s.Key, "key", "", "client key for mutual TLS")
	fs.StringVar(&s.User, "user", "", "an external cluster with authentication on: log in as name[:password], as etcdctl (without a password: --password-file)")
	fs.StringVar(&s.PasswordFile, "password-file", "", "file whose first line is the password of --user")
	fs.Float64Var(&s.MemberCPUs, "member-cpus", 0, "docker: CPU limit of each member container in cores (an instance size)")
	fs.StringVar(&s.MemberMemory, "member-memory", "", "docker: memory limit of each member container, e.g. 2GiB")
	fs.StringVar(&s.EtcdVersion, "etcd-version", "", "etcd release the members run (default: the linked etcd)")
	fs.DurationVar(&s.CheckTimeout, "check-timeout", 2*time.Minute, "time limit of each step's consistency checks; undecided checks leave the step undecided")
	fs.SortFlags = false
	cmd.AddCommand(qualifyDiskCommand(stdout, stderr, code))
	return cmd
}
