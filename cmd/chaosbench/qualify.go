package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/etcd-chaosbench/chaosbench"
	"github.com/etcd-chaosbench/chaosbench/clusters/diskprobe"
)

func qualifyDiskCommand(stdout, stderr io.Writer, code *int) *cobra.Command {
	var o chaosbench.DiskOptions
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
	fs.StringVar(&o.Dir, "dir", ".", "a directory on the disk to judge (a scratch directory is created and removed below it)")
	fs.Int64Var(&o.Size, "size", diskprobe.DefaultSize, "bytes each pattern writes (fio's etcd test: 22 MiB)")
	fs.DurationVar(&o.MaxTime, "max-time", diskprobe.DefaultMaxTime, "stop a pattern that takes longer, and say so")
	fs.Int64Var(&o.Seed, "seed", 1, "seed of the bbolt pattern's page offsets and of the data written")
	fs.StringVar(&o.JSON, "json", "", "also write the result to this file (JSON)")
	return cmd
}

func qualifyCommand(stdout, stderr io.Writer, code *int) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "qualify",
		Short: "Qualify hardware for etcd: disk probe, network probe and a load ladder of Kubernetes size classes",
	}
	cmd.AddCommand(qualifyDiskCommand(stdout, stderr, code))
	return cmd
}
