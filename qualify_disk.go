package chaosbench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/etcd-chaosbench/chaosbench/clusters"
	"github.com/etcd-chaosbench/chaosbench/clusters/diskprobe"
	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/workloads/kube"
)

// Classes are the size classes qualify climbs, smallest first (etcd's hardware guidance; kube presets).
var Classes = kube.Presets

// heavyClasses are the classes held to the disk's heavy-load bar (2 ms, 500 IOPS): above 1000 requests/s
// etcd's guidance speaks of heavy load.
var heavyClasses = map[string]bool{"large": true, "xlarge": true}

// DiskOptions configures `chaosbench qualify disk`.
type DiskOptions struct {
	// Dir is a directory on the disk to judge.
	Dir string
	// Size is the bytes each pattern writes (default 22 MiB, fio's etcd test); MaxTime bounds each pattern.
	Size    int64
	MaxTime time.Duration
	Seed    int64
	// JSON, when set, is a file the result is written to.
	JSON string
	// Out receives the verdict line and the table.
	Out io.Writer
}

// DiskQualification is the disk probe's result with its judgement and the classes the disk allows.
type DiskQualification struct {
	Probe     *diskprobe.Result   `json:"probe"`
	Judgement diskprobe.Judgement `json:"judgement"`
	// Allowed are the classes the disk is fast enough for, smallest first.
	Allowed []string `json:"allowed_classes"`
	// Verdict is the judgement in one line.
	Verdict string `json:"verdict"`
}

// allows reports whether the disk is fast enough for class.
func (d *DiskQualification) allows(class string) bool {
	for _, c := range d.Allowed {
		if c == class {
			return true
		}
	}
	return false
}

// why says why the disk does not allow class.
func (d *DiskQualification) why(class string) string {
	if !d.Judgement.Fit {
		return strings.Join(d.Judgement.Unfit, "; ")
	}
	if heavyClasses[class] {
		return strings.Join(d.Judgement.NotHeavy, "; ")
	}
	return ""
}

// judgeDisk maps a probe's judgement to the classes: every class needs a fit disk, large and xlarge the
// heavy-load bar too.
func judgeDisk(r *diskprobe.Result) *DiskQualification {
	d := &DiskQualification{Probe: r, Judgement: diskprobe.Judge(r)}
	var not []string
	for _, c := range Classes {
		if d.Judgement.Fit && (!heavyClasses[c] || d.Judgement.Heavy) {
			d.Allowed = append(d.Allowed, c)
		} else {
			not = append(not, c)
		}
	}
	j := d.Judgement
	figures := fmt.Sprintf("WAL fdatasync p99 %s, %.0f synced writes/s, bbolt commit p99 %s",
		diskprobe.Ms(j.WALFsyncP99), j.IOPS, diskprobe.Ms(j.CommitP99))
	switch {
	case len(d.Allowed) == 0:
		d.Verdict = fmt.Sprintf("disk too slow for etcd: %s", strings.Join(j.Unfit, "; "))
	case len(not) == 0:
		d.Verdict = fmt.Sprintf("disk fast enough for every class (%s): %s", strings.Join(d.Allowed, ", "), figures)
	default:
		d.Verdict = fmt.Sprintf("disk fast enough for %s; not %s: %s", strings.Join(d.Allowed, ", "), strings.Join(not, ", "), strings.Join(j.NotHeavy, "; "))
	}
	if r.Memory {
		d.Verdict += fmt.Sprintf(" (%s is memory, tmpfs: not a disk)", r.Dir)
	}
	return d
}

// probeDisk runs the probe under dir and judges it.
func probeDisk(ctx context.Context, dir string, size int64, maxTime time.Duration, seed int64) (*DiskQualification, error) {
	r, err := diskprobe.Probe(ctx, diskprobe.Options{Dir: dir, Size: size, MaxTime: maxTime, Seed: seed})
	if err != nil {
		return nil, err
	}
	return judgeDisk(r), nil
}

// QualifyDisk probes the disk under o.Dir with etcd's write patterns, prints the verdict first and then the
// figures, and returns an error carrying outcome ThresholdFailed (exit 3) when the disk is too slow for any
// class.
func QualifyDisk(ctx context.Context, o DiskOptions) (*DiskQualification, error) {
	if o.Out == nil {
		o.Out = io.Discard
	}
	if st, err := os.Stat(o.Dir); err != nil || !st.IsDir() {
		return nil, outcome.Usagef("--dir %q: not a directory", o.Dir)
	}
	if o.Size < 0 || o.MaxTime < 0 {
		return nil, outcome.Usagef("--size and --max-time must not be negative")
	}
	fmt.Fprintf(o.Out, "probing the disk under %s: etcd's WAL appends (2300 B, 8000 B) and bbolt commits, each followed by fdatasync...\n", o.Dir)
	d, err := probeDisk(ctx, o.Dir, o.Size, o.MaxTime, o.Seed)
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(o.Out, d.Verdict)
	writeDiskTable(o.Out, d)
	if o.JSON != "" {
		b, err := json.MarshalIndent(d, "", "  ")
		if err != nil {
			return d, err
		}
		if err := os.WriteFile(o.JSON, append(b, '\n'), 0o644); err != nil {
			return d, fmt.Errorf("write %s: %w", o.JSON, err)
		}
	}
	if !d.Judgement.Fit {
		return d, outcome.Decide(outcome.New(outcome.ThresholdFailed, "%s", d.Verdict)).Err()
	}
	return d, nil
}

// writeDiskTable prints one row per pattern.
func writeDiskTable(w io.Writer, d *DiskQualification) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "pattern\twrites\tMiB\tIOPS\tMB/s\tfdatasync p50\tp99\tp99.9\tmax\tcommit p99\t")
	for _, p := range d.Probe.Patterns {
		commit := "-"
		if p.Commit != nil {
			commit = diskprobe.Ms(p.Commit.P99)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f\t%.0f\t%.1f\t%s\t%s\t%s\t%s\t%s\t\n", p.Name, p.Writes, float64(p.Bytes)/(1<<20), p.IOPS,
			p.BytesPerSecond/1e6, diskprobe.Ms(p.Fdatasync.P50), diskprobe.Ms(p.Fdatasync.P99), diskprobe.Ms(p.Fdatasync.P999),
			diskprobe.Ms(p.Fdatasync.Max), commit)
	}
	tw.Flush()
	for _, p := range d.Probe.Patterns {
		if p.Stopped != "" {
			fmt.Fprintf(w, "%s: %s\n", p.Name, p.Stopped)
		}
	}
	fmt.Fprintf(w, "guidance: WAL fdatasync p99 < %s with >= %.0f IOPS for every class; < %s with >= %.0f IOPS for large and xlarge (heavy load); bbolt commit p99 < %s\n",
		diskprobe.Ms(diskprobe.FsyncLimitMs), diskprobe.MinIOPS, diskprobe.Ms(diskprobe.HeavyFsyncLimitMs), diskprobe.HeavyIOPS, diskprobe.Ms(diskprobe.CommitLimitMs))
}

// diskProbeFile is the disk probe's JSON inside a qualification directory (the docker probe writes it from
// its container).
const diskProbeFile = "disk-probe.json"

// probeDisks probes the disk the members write to, as each backend allows: on an embedded cluster, the data
// root's disk from here; on a docker cluster, from a container of the builtin image on the directory the
// members' data directories are bind-mounted from, as a member sees it; on an external cluster, nothing
// can be probed from here, and the results of `chaosbench qualify disk --json` run on the members' hosts
// (DiskResults) are attached and judged instead. With several, the worst decides the classes.
func (o *QualifyOptions) probeDisks(ctx context.Context, dir string, q *Qualification) error {
	if !o.DiskProbe && len(o.DiskResults) == 0 {
		return nil
	}
	switch {
	case len(o.DiskResults) > 0:
		for _, f := range o.DiskResults {
			d, err := readDiskResult(f)
			if err != nil {
				return err
			}
			q.MemberDisks = append(q.MemberDisks, HostDisk{Source: f, Disk: d})
			fmt.Fprintf(o.Log, "disk (%s): %s\n", f, d.Verdict)
		}
		q.Disk = worstDisk(q.MemberDisks)
		return nil
	case o.Scenario.Cluster == "embed":
		probeDir := o.DataRoot
		if probeDir == "" {
			probeDir = dir
		}
		fmt.Fprintf(o.Log, "disk: probing %s (etcd's WAL and bbolt write patterns)...\n", probeDir)
		d, err := probeDisk(ctx, probeDir, o.DiskSize, 0, q.Seed)
		if err != nil {
			return fmt.Errorf("disk probe: %w", err)
		}
		q.Disk = d
	case o.Scenario.Cluster == "docker":
		fmt.Fprintf(o.Log, "disk: probing %s from a container, as the members see their data directories...\n", dir)
		d, err := o.probeDockerDisk(ctx, dir, q.Seed)
		if err != nil {
			return fmt.Errorf("disk probe: %w", err)
		}
		q.Disk = d
	default:
		fmt.Fprintf(o.Log, "disk: an external cluster's disks cannot be probed from here: run `chaosbench qualify disk --dir DATA_DIR --json FILE` on each member's host and pass --disk-result FILE\n")
		return nil
	}
	fmt.Fprintf(o.Log, "disk: %s\n", q.Disk.Verdict)
	return nil
}

// probeDockerDisk runs `chaosbench qualify disk` in a container of the builtin image on the qualification
// directory, where the members' data directories live and from which they are bind-mounted.
func (o *QualifyOptions) probeDockerDisk(ctx context.Context, dir string, seed int64) (*DiskQualification, error) {
	args := []string{"qualify", "disk", "--dir", clusters.ContainerProbeDir, "--seed", strconv.FormatInt(seed, 10),
		"--json", clusters.ContainerProbeDir + "/" + diskProbeFile}
	if o.DiskSize > 0 {
		args = append(args, "--size", strconv.FormatInt(o.DiskSize, 10))
	}
	out, err := clusters.RunContainerProbe(ctx, clusters.ContainerProbe{HostDir: dir, Args: args, Log: o.Log,
		Image: clusters.ImageOptions{Log: o.Log}})
	if status, ok := clusters.IsContainerExit(err); ok && status == int64(outcome.ExitThresholds) {
		err = nil // the disk is too slow: the result says so
	}
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, out)
	}
	return readDiskResult(filepath.Join(dir, diskProbeFile))
}

// HostDisk is the disk probe of one member's host, attached from `chaosbench qualify disk --json`.
type HostDisk struct {
	// Source is the file the result was read from.
	Source string             `json:"source"`
	Disk   *DiskQualification `json:"disk"`
}

// readDiskResult reads a `qualify disk --json` result and judges it again (the guidance of this version).
func readDiskResult(path string) (*DiskQualification, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, outcome.Usagef("--disk-result %s: %v", path, err)
	}
	var d DiskQualification
	if err := json.Unmarshal(b, &d); err != nil || d.Probe == nil || len(d.Probe.Patterns) == 0 {
		if err == nil {
			err = errors.New("no probe patterns in it")
		}
		return nil, outcome.Usagef("--disk-result %s: not a `chaosbench qualify disk --json` result: %v", path, err)
	}
	return judgeDisk(d.Probe), nil
}

// worstDisk is the member disk that allows the fewest classes.
func worstDisk(ds []HostDisk) *DiskQualification {
	var worst *DiskQualification
	for _, h := range ds {
		if worst == nil || len(h.Disk.Allowed) < len(worst.Allowed) {
			worst = h.Disk
		}
	}
	return worst
}

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
