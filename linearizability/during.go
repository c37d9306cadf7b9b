package linearizability

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// DuringLoad checks a run's history while the run records it, so that the check after the load has
// less left to do: it checks the history recorded so far again and again, each time it has grown by a
// quarter, and remembers the per-key segments porcupine proved linearizable (Proofs). The check after the
// load (CheckDir with Options.Proofs) takes those segments as proved and searches only the rest: the
// segments the load's last stretch made or changed. Its verdict is the offline check's, violation for
// violation (see Proofs); what the checks during the load found themselves decides nothing, since a
// history cut while operations are in flight holds answers whose writes have not been recorded yet.
//
// A check during the load reads a copy of the files' recorded prefix (in a temporary directory in the run
// directory, removed after it), and runs porcupine on one goroutine, to leave the load its CPUs.
type DuringLoad struct {
	dir    string
	opts   Options
	proofs *Proofs
	cancel context.CancelFunc
	done   chan struct{}

	flush    func() error  // writes out what the history writer holds (nil: nothing)
	poll     time.Duration // how often the history's size is looked at
	growth   float64       // how much it must have grown since the last check began
	minBytes int64         // and how big it must be for the first

	mu    sync.Mutex
	stats results.CheckDuringLoad
}

// duringLoadGrowth is how much the history must grow between two checks during the load: each check
// rereads everything before, so checks at a fixed growth factor cost about 1/(growth-1) times the last one
// in all. duringLoadMinBytes keeps the first checks from running on almost nothing.
const (
	duringLoadGrowth   = 1.25
	duringLoadMinBytes = 256 << 10
	duringLoadPoll     = 2 * time.Second
)

// StartDuringLoad starts checking the history recorded into run directory dir in the background, until
// Stop. opts are the check's options (Timeout bounds each check; Faults and the visualization are not
// used).
//
// flush, when set, is the history writer's Flush: called before each copy, it puts both files at one
// instant of the run, so that the copy's watch events and operations agree as far as operations in flight
// let them (a watch event whose write is not recorded yet makes the cut history's segments of its key
// differ from the final ones, which costs their proofs).
func StartDuringLoad(ctx context.Context, dir string, opts Options, flush func() error) *DuringLoad {
	return startDuringLoad(ctx, dir, opts, flush, duringLoadPoll, duringLoadGrowth, duringLoadMinBytes)
}

func startDuringLoad(ctx context.Context, dir string, opts Options, flush func() error, poll time.Duration, growth float64, minBytes int64) *DuringLoad {
	ctx, cancel := context.WithCancel(ctx)
	d := &DuringLoad{dir: dir, opts: opts, proofs: NewProofs(), cancel: cancel, done: make(chan struct{}),
		flush: flush, poll: poll, growth: growth, minBytes: minBytes}
	go d.loop(ctx)
	return d
}

// Proofs returns the segments proved so far: Options.Proofs of the check after the load. Close them
// after it.
func (d *DuringLoad) Proofs() *Proofs { return d.proofs }

// Stop ends the checks during the load, cutting the one under way short (it stops within a pass over a
// few thousand records), waits for it and says what they did. The proofs stay.
func (d *DuringLoad) Stop() results.CheckDuringLoad {
	d.cancel()
	<-d.done
	// Each finished check pruned what it did not meet; what the one cut short proved stays too. The
	// check after the load only reads them.
	d.proofs.freeze(d.dir)
	d.mu.Lock()
	defer d.mu.Unlock()
	st := d.stats
	st.ProvedPartitions = d.proofs.Len()
	return st
}

func (d *DuringLoad) loop(ctx context.Context) {
	defer close(d.done)
	var checked int64
	t := time.NewTicker(d.poll)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fi, err := os.Stat(filepath.Join(d.dir, history.HistoryFile))
		if err != nil || fi.Size() < max(d.minBytes, int64(float64(checked)*d.growth)) {
			continue
		}
		checked = fi.Size()
		start := time.Now()
		n, err := d.checkPrefix(ctx)
		d.mu.Lock()
		d.stats.Seconds += time.Since(start).Seconds()
		switch {
		case ctx.Err() != nil:
			d.stats.Stopped++
		case err != nil:
			d.stats.Errors = append(d.stats.Errors, err.Error())
		default:
			d.stats.Checks++
			d.stats.Operations = n
		}
		if ctx.Err() == nil && err == nil {
			d.proofs.prune() // the next check cuts its segments as this one did, or later
		}
		d.mu.Unlock()
	}
}

// checkPrefix checks a copy of what the run's history files hold now and returns how many operations it
// covered.
func (d *DuringLoad) checkPrefix(ctx context.Context) (int, error) {
	tmp, err := os.MkdirTemp(d.dir, ".check-during-load-")
	if err != nil {
		return 0, fmt.Errorf("check during the load: %w", err)
	}
	defer os.RemoveAll(tmp)
	// Both files as they were at one instant: flushed together, then each copied up to the size it had
	// right after.
	if d.flush != nil {
		if err := d.flush(); err != nil {
			return 0, fmt.Errorf("check during the load: %w", err)
		}
	}
	var sizes [2]int64
	names := [2]string{history.HistoryFile, history.WatchFile}
	for i, name := range names {
		if fi, err := os.Stat(filepath.Join(d.dir, name)); err == nil {
			sizes[i] = fi.Size()
		} else if !errors.Is(err, os.ErrNotExist) {
			return 0, fmt.Errorf("check during the load: %w", err)
		} else {
			sizes[i] = -1
		}
	}
	for i, name := range names {
		if sizes[i] < 0 {
			continue
		}
		if err := copyPrefix(filepath.Join(d.dir, name), filepath.Join(tmp, name), sizes[i]); err != nil {
			return 0, err
		}
	}
	wl := watchLog{}
	if sizes[1] >= 0 {
		wl.path = filepath.Join(tmp, history.WatchFile)
	}
	ops, err := history.LoadOperationStore(tmp)
	if err != nil {
		return 0, fmt.Errorf("check during the load: %w", err)
	}
	defer ops.Close()
	opts := d.opts
	opts.Faults, opts.VisualizationPath = nil, ""
	opts.Proofs, opts.workers = d.proofs, 1
	opts.paging, opts.pageDir = true, tmp
	opts.stop = func() bool { return ctx.Err() != nil }
	if _, err := check(ctx, ops, wl, opts); err != nil {
		return 0, fmt.Errorf("check during the load: %w", err)
	}

	return ops.Len(), nil
}

// copyPrefix copies the first size bytes of file from into to. A record the writer was still appending
// may be cut short at the end: the history's readers end a file there.
func copyPrefix(from, to string, size int64) error {
	src, err := os.Open(from)
	if err != nil {
		return fmt.Errorf("check during the load: %w", err)
	}
	defer src.Close()
	dst, err := os.Create(to)
	if err != nil {
		return fmt.Errorf("check during the load: %w", err)
	}
	_, err = io.CopyN(dst, src, size)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("check during the load: copy %s: %w", filepath.Base(from), err)
	}
	return nil
}
