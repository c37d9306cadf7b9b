// Package diskprobe measures a directory's disk the way etcd uses it, before etcd runs on it.
//
// etcd waits on two kinds of disk write. Its write-ahead log appends records to a preallocated segment file
// and calls fdatasync before it acknowledges a write; bbolt, its backend, rewrites pages of its database
// file at random offsets and calls fdatasync at every commit, then writes a meta page and syncs again.
// Probe replays both patterns in a scratch directory under the disk to judge and records every fdatasync
// in an HDR histogram, so that the figures compare with etcd's own metrics
// (etcd_disk_wal_fsync_duration_seconds, etcd_disk_backend_commit_duration_seconds) and with the fio test
// operators run (`fio --rw=write --ioengine=sync --fdatasync=1 --size=22m --bs=2300`).
//
// Judge compares the figures with etcd's hardware guidance. It says nothing about cluster size classes:
// that mapping belongs to the caller (chaosbench's qualify), which knows the classes.
package diskprobe

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
	"golang.org/x/sys/unix"
)

// Defaults of Options.
const (
	// DefaultSize is what fio's etcd test writes per pattern (--size=22m), and the least this probe writes.
	DefaultSize = 22 << 20
	// DefaultMaxTime bounds each pattern: a disk so slow that 22 MiB takes longer has shown what it is.
	DefaultMaxTime = 2 * time.Minute
	// pageSize is bbolt's page size on Linux.
	pageSize = 4096
	// pagesPerCommit is how many random pages a simulated bbolt commit rewrites besides the meta page: a
	// small transaction touches a leaf, its branch parents and the freelist.
	pagesPerCommit = 4
)

// WAL block sizes: 2300 B is the fio test's block (about a small Kubernetes object and its WAL framing),
// 8000 B the etcd-perf container's and OKD's.
var walBlocks = []int{2300, 8000}

// Options configures a probe.
type Options struct {
	// Dir is a directory on the disk to judge; the probe works in a scratch directory below it and removes it.
	Dir string
	// Size is the number of bytes each pattern writes (default DefaultSize).
	Size int64
	// MaxTime stops a pattern early when it takes longer (default DefaultMaxTime); the pattern then says so.
	MaxTime time.Duration
	// Seed seeds the bbolt pattern's page offsets and the data written.
	Seed int64
}

// Latency is a distribution of durations, in milliseconds.
type Latency struct {
	Count int64   `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P99   float64 `json:"p99"`
	P999  float64 `json:"p99_9"`
	Max   float64 `json:"max"`
}

// Pattern is one write pattern's figures.
type Pattern struct {
	// Name is "wal-2300", "wal-8000" or "bbolt".
	Name string `json:"name"`
	// Block is the bytes per write (bbolt: one page).
	Block int `json:"block_bytes"`
	// Writes and Bytes count what was written, Seconds how long the pattern took.
	Writes  int64   `json:"writes"`
	Bytes   int64   `json:"bytes"`
	Seconds float64 `json:"seconds"`
	// IOPS is fdatasyncs per second: for the WAL patterns, synced sequential writes per second.
	IOPS float64 `json:"iops"`
	// BytesPerSecond is the write throughput, syncs included.
	BytesPerSecond float64 `json:"bytes_per_second"`
	// Fdatasync is the latency of every fdatasync call.
	Fdatasync Latency `json:"fdatasync_ms"`
	// Commit is, for the bbolt pattern, a whole commit: the page writes, their sync, the meta page and its sync.
	Commit *Latency `json:"commit_ms,omitempty"`
	// Stopped says why the pattern wrote less than Size (MaxTime reached), empty when it did not.
	Stopped string `json:"stopped,omitempty"`
}

// Result is what a probe measured.
type Result struct {
	Dir string `json:"dir"`
	// Memory is true when Dir is on tmpfs or ramfs: memory, not a disk, whose figures say nothing about a
	// disk's.
	Memory   bool      `json:"memory,omitempty"`
	Size     int64     `json:"size_bytes"`
	Patterns []Pattern `json:"patterns"`
}

// Pattern returns the pattern of that name.
func (r *Result) Pattern(name string) (Pattern, bool) {
	for _, p := range r.Patterns {
		if p.Name == name {
			return p, true
		}
	}
	return Pattern{}, false
}

// Probe runs the WAL patterns (2300 B and 8000 B appends, each followed by fdatasync) and the bbolt
// pattern (random page writes, fdatasync, meta page, fdatasync) in a scratch directory under opts.Dir.
func Probe(ctx context.Context, opts Options) (*Result, error) {
	if opts.Size <= 0 {
		opts.Size = DefaultSize
	}
	if opts.MaxTime <= 0 {
		opts.MaxTime = DefaultMaxTime
	}
	st, err := os.Stat(opts.Dir)
	if err != nil {
		return nil, fmt.Errorf("disk probe: %w", err)
	}
	if !st.IsDir() {
		return nil, fmt.Errorf("disk probe: %s is not a directory", opts.Dir)
	}
	scratch, err := os.MkdirTemp(opts.Dir, ".chaosbench-diskprobe-")
	if err != nil {
		return nil, fmt.Errorf("disk probe: %w", err)
	}
	defer os.RemoveAll(scratch)
	rng := rand.New(rand.NewPCG(uint64(opts.Seed), 0x6469736b)) // "disk"
	data := make([]byte, 1<<16)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	res := &Result{Dir: opts.Dir, Size: opts.Size}
	var fs unix.Statfs_t
	if unix.Statfs(opts.Dir, &fs) == nil && (fs.Type == unix.TMPFS_MAGIC || fs.Type == unix.RAMFS_MAGIC) {
		res.Memory = true
	}
	for _, block := range walBlocks {
		p, err := walPattern(ctx, filepath.Join(scratch, fmt.Sprintf("wal-%d", block)), block, data, opts)
		if err != nil {
			return nil, err
		}
		res.Patterns = append(res.Patterns, p)
	}
	p, err := boltPattern(ctx, filepath.Join(scratch, "bbolt.db"), data, rng, opts)
	if err != nil {
		return nil, err
	}
	res.Patterns = append(res.Patterns, p)
	return res, nil
}

// newHistogram records nanoseconds from 1 ns to 10 minutes at 3 significant digits.
func newHistogram() *hdr.Histogram { return hdr.New(1, int64(10*time.Minute), 3) }

func latencyOf(h *hdr.Histogram) Latency {
	ms := func(ns int64) float64 { return float64(ns) / 1e6 }
	return Latency{
		Count: h.TotalCount(), Mean: h.Mean() / 1e6,
		P50: ms(h.ValueAtQuantile(50)), P99: ms(h.ValueAtQuantile(99)), P999: ms(h.ValueAtQuantile(99.9)),
		Max: ms(h.Max()),
	}
}

// create makes a file of size bytes preallocated, as etcd preallocates its WAL segments (and fio its files):
// fdatasync then measures data, not the allocation of new blocks.
func create(path string, size int64) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("disk probe: %w", err)
	}
	if err := unix.Fallocate(int(f.Fd()), 0, 0, size); err != nil && !errors.Is(err, unix.EOPNOTSUPP) && !errors.Is(err, unix.ENOSYS) {
		f.Close()
		return nil, fmt.Errorf("disk probe: preallocate %s: %w", path, err)
	}
	// The preallocation itself must be durable before the measured syncs, as a WAL segment's is.
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("disk probe: sync %s: %w", path, err)
	}
	return f, nil
}

// fdatasync syncs f's data and returns how long the call took.
//
// It enters the kernel with RawSyscall, not the usual Syscall. A Syscall that blocks longer than about
// 20 µs lets the Go scheduler hand the goroutine's P to another thread, and on return the goroutine must
// get a P back: on a busy machine that wait falls inside the measured interval, and it made the probe's
// p99 read 0.05 ms (quiet) to 1 ms (busy) above fio's for the same writes. RawSyscall keeps the thread
// and its P for the call, so the time measured is the kernel's, as fio measures it. The cost is that a
// stop-the-world pause of the garbage collector may wait for one fdatasync, which a probe can afford.
func fdatasync(f *os.File) (time.Duration, error) {
	fd := f.Fd()
	start := time.Now()
	_, _, errno := unix.RawSyscall(unix.SYS_FDATASYNC, fd, 0, 0)
	took := time.Since(start)
	if errno != 0 {
		return took, errno
	}
	return took, nil
}

func record(h *hdr.Histogram, d time.Duration) {
	_ = h.RecordValue(max(int64(d), 1)) // beyond ten minutes the value is clamped by the caller's MaxTime
}

func walPattern(ctx context.Context, path string, block int, data []byte, opts Options) (Pattern, error) {
	f, err := create(path, opts.Size)
	if err != nil {
		return Pattern{}, err
	}
	defer f.Close()
	p := Pattern{Name: fmt.Sprintf("wal-%d", block), Block: block}
	h := newHistogram()
	start := time.Now()
	for off := 0; p.Bytes < opts.Size; off = (off + block) % (len(data) - block) {
		if err := ctx.Err(); err != nil {
			return Pattern{}, err
		}
		if time.Since(start) > opts.MaxTime {
			p.Stopped = fmt.Sprintf("stopped after %s (--max-time) with %d of %d bytes written", opts.MaxTime, p.Bytes, opts.Size)
			break
		}
		n, err := f.Write(data[off : off+block])
		if err != nil {
			return Pattern{}, fmt.Errorf("disk probe: write %s: %w", path, err)
		}
		d, err := fdatasync(f)
		if err != nil {
			return Pattern{}, fmt.Errorf("disk probe: fdatasync %s: %w", path, err)
		}
		record(h, d)
		p.Writes++
		p.Bytes += int64(n)
	}
	finish(&p, h, time.Since(start))
	return p, nil
}

func finish(p *Pattern, h *hdr.Histogram, took time.Duration) {
	p.Seconds = took.Seconds()
	p.Fdatasync = latencyOf(h)
	if p.Seconds > 0 {
		p.IOPS = float64(h.TotalCount()) / p.Seconds
		p.BytesPerSecond = float64(p.Bytes) / p.Seconds
	}
}

// boltPattern rewrites pagesPerCommit random pages of a preallocated file, syncs, writes one of the two
// meta pages and syncs again, as bbolt's Tx.Commit does, until Size bytes are written.
func boltPattern(ctx context.Context, path string, data []byte, rng *rand.Rand, opts Options) (Pattern, error) {
	fileSize := max(opts.Size, 64*pageSize)
	f, err := create(path, fileSize)
	if err != nil {
		return Pattern{}, err
	}
	defer f.Close()
	p := Pattern{Name: "bbolt", Block: pageSize}
	syncs, commits := newHistogram(), newHistogram()
	pages := fileSize / pageSize
	start := time.Now()
	write := func(page int64) error {
		off := rng.IntN(len(data) - pageSize)
		n, err := f.WriteAt(data[off:off+pageSize], page*pageSize)
		p.Writes++
		p.Bytes += int64(n)
		if err != nil {
			return fmt.Errorf("disk probe: write %s: %w", path, err)
		}
		return nil
	}
	sync := func() error {
		d, err := fdatasync(f)
		if err != nil {
			return fmt.Errorf("disk probe: fdatasync %s: %w", path, err)
		}
		record(syncs, d)
		return nil
	}
	for tx := int64(0); p.Bytes < opts.Size; tx++ {
		if err := ctx.Err(); err != nil {
			return Pattern{}, err
		}
		if time.Since(start) > opts.MaxTime {
			p.Stopped = fmt.Sprintf("stopped after %s (--max-time) with %d of %d bytes written", opts.MaxTime, p.Bytes, opts.Size)
			break
		}
		began := time.Now()
		for range pagesPerCommit {
			if err := write(2 + rng.Int64N(pages-2)); err != nil { // pages 0 and 1 are the meta pages
				return Pattern{}, err
			}
		}
		if err := sync(); err != nil {
			return Pattern{}, err
		}
		if err := write(tx % 2); err != nil {
			return Pattern{}, err
		}
		if err := sync(); err != nil {
			return Pattern{}, err
		}
		record(commits, time.Since(began))
	}
	finish(&p, syncs, time.Since(start))
	c := latencyOf(commits)
	p.Commit = &c
	return p, nil
}
