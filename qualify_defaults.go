package chaosbench

import "github.com/etcd-chaosbench/chaosbench/clusters/diskprobe"

// DefaultDiskSize is what each disk-probe pattern writes unless told otherwise: what fio's etcd test writes
// (22 MiB), which is also the least that shows a disk's fdatasync tail. It is the default of
// DiskOptions.Size and of QualifyOptions.DiskSize.
const DefaultDiskSize = diskprobe.DefaultSize

// DefaultDiskOptions returns the options of a plain `chaosbench qualify disk`: the current directory's
// disk, DefaultDiskSize per pattern, a time limit per pattern (a disk that slow has shown what it is) and
// a fixed seed, so that two probes of one disk write the same pages.
func DefaultDiskOptions() DiskOptions {
	return DiskOptions{Dir: ".", Size: DefaultDiskSize, MaxTime: diskprobe.DefaultMaxTime, Seed: 1}
}
