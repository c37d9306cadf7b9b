package linearizability

import (
	"errors"
	"fmt"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// Follower reads a run's history while the run writes it, so that the check after the load has less to
// do: the operations into the store the check reads them from (history.Follower) and through the first
// pass over them (opFold), and the watch records through the first pass over them (the watchers, the keys
// their events name, the highest revision); each pass depends on the records alone. What it hands the
// check (Options.Followed) is what that check would have built from the finished files, so the report is
// the same line by line; see the package documentation, Checks while the load runs, for why the other
// passes wait for the load's end.
type Follower struct {
	ops     *history.Follower
	watches *history.WatchFollower
	groups  *watcherGroups // the watch records folded so far; nil once taken or when reading failed
	store   *history.OperationStore
	// folded is the operations folded so far (opFold and classifyOp), in a checker of its own whose
	// paged arrays are in the run directory, as CheckDir's are; nil once taken or when reading failed.
	folded *checker
}

// Follow starts reading the history files of run directory dir (history.NewWriter created them) while
// they are written, until Finish or Close.
func Follow(dir string) *Follower {
	c := &checker{paging: true, pageDir: dir, fold: newOpFold()}
	f := &Follower{groups: newWatcherGroups(), folded: c}
	f.ops = history.FollowOperations(dir, func(i int, op *history.Operation) {
		if i == 0 {
			c.startClassify() // its array's file is made on the follower's goroutine, which recovers its failure
		}
		c.foldOp(i, op)
	})
	f.watches = history.FollowWatches(dir, f.groups.add)
	return f
}

// Finish tells the follower that the files are complete (their Writer is closed) and waits for it to read
// the rest. An error says what it could not read: CheckDir reads that part from the files, which decides as
// much; the rest it takes.
func (f *Follower) Finish() error {
	var errs []error
	store, err := f.ops.Finish()
	if err != nil {
		f.closeFolded()
		errs = append(errs, fmt.Errorf("read the operations while they were written: %w", err))
	} else {
		f.store = store
	}
	if err := f.watches.Finish(); err != nil {
		f.groups = nil
		errs = append(errs, fmt.Errorf("read the watch records while they were written: %w", err))
	}
	return errors.Join(errs...)
}

// Close stops the follower, when it has not finished, and releases the store.
func (f *Follower) Close() error {
	f.watches.Close()
	err := f.ops.Close()
	if f.store != nil {
		err = errors.Join(err, f.store.Close())
		f.store = nil
	}
	f.groups = nil
	f.closeFolded()
	return err
}

// closeFolded releases the folded operations' paged arrays, when no check took them.
func (f *Follower) closeFolded() {
	if f.folded == nil {
		return
	}
	for _, close := range f.folded.paged {
		close()
	}
	f.folded = nil
}

// take hands what the follower read to one check: the store (which stays the follower's to close), the
// folded watch records and the folded operations (which become the check's: it changes them).
func (f *Follower) take() (*history.OperationStore, *watcherGroups, *checker) {
	g, c := f.groups, f.folded
	f.groups, f.folded = nil, nil
	if f.store == nil {
		c = nil // not folded from the store the check reads
	}
	return f.store, g, c
}
