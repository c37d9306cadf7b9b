package history

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Follower reads a run's operations into an OperationStore while the run writes them (Writer), so that
// the check after the load finds them loaded: of the reading, decoding and encoding LoadOperationStore
// does after the load, only the records written since the follower last caught up are left. The store it
// builds is the one LoadOperationStore builds from the finished file, record for record: the same records
// in the same order, encoded by one encoder (the key-values are held and numbered as they come).
//
// It reads the file as the writer appends to it: at its end it waits (polling) for more, a record the
// writer has only partly written included, until Finish says the file is complete; then, like every
// reader of a history, it ends the file at a record cut short. What it holds in memory is what the store
// holds while it loads, and a read buffer.
type Follower struct {
	follow
	store *OperationStore // set when the goroutine ends without an error
	taken bool            // Finish handed the store out: Close leaves it to the caller
}

// WatchFollower passes a run's watch records to a function while the run writes them, as ReadWatches
// passes those of the finished file: the same records, in the same order.
type WatchFollower struct{ follow }

// follow is what both followers share: the goroutine that reads a file behind its writer, and how it is
// told that the file is complete (Finish) or that it is no longer wanted (Close).
type follow struct {
	finish chan struct{} // closed by Finish: the writer is closed, the file complete
	stop   chan struct{} // closed by Close: give up
	done   chan struct{} // closed when the goroutine ends
	once   sync.Once     // closes finish
	halt   sync.Once     // closes stop
	err    error
}

// followPoll is how long a follower waits at the end of the file before it looks again.
const followPoll = 250 * time.Millisecond

// errFollowStopped is how a follower's reads end when it is closed before the file is complete.
var errFollowStopped = errors.New("history follower closed")

// start reads the file at path behind its writer with read, in a goroutine of its own.
func (f *follow) start(path string, poll time.Duration, read func(r io.Reader) error) {
	f.finish, f.stop, f.done = make(chan struct{}), make(chan struct{}), make(chan struct{})
	go func() {
		defer close(f.done)
		file, err := os.Open(path)
		if err != nil {
			f.err = fmt.Errorf("follow history: %w", err)
			return
		}
		defer file.Close()
		f.err = read(&followReader{f: file, finish: f.finish, stop: f.stop, poll: poll})
	}()
}

// wait tells the follower that the file is complete and waits for it to read the rest.
func (f *follow) wait() error {
	f.once.Do(func() { close(f.finish) })
	<-f.done
	return f.err
}

// end stops the follower, when it has not finished, and waits for it.
func (f *follow) end() {
	f.halt.Do(func() { close(f.stop) }) // after Finish, the goroutine has ended: nothing to stop
	<-f.done
}

// FollowOperations starts reading the operations written to run directory dir's history file (which
// NewWriter created) into a store, in the background, until Finish or Close. The store keeps its records in
// files in dir, as LoadOperationStore's does. fold, when set, is called with each operation and its number
// in the store, on the follower's goroutine, before the next is read: it may keep the operation's strings,
// not the operation or its other parts, whose memory the next one reuses. A ReadBackError it panics with
// ends the follower with that error.
func FollowOperations(dir string, fold func(i int, op *Operation)) *Follower {
	return followOperations(dir, followPoll, storeSizes{}, fold)
}

func followOperations(dir string, poll time.Duration, sizes storeSizes, fold func(i int, op *Operation)) *Follower {
	fl := &Follower{}
	path := filepath.Join(dir, HistoryFile)
	fl.start(path, poll, func(r io.Reader) (err error) {
		fl.store, err = buildStore(dir, sizes, path, r, fold)
		return err
	})
	return fl
}

// Finish tells the follower that the history file is complete (its Writer is closed), waits for it to
// read the rest and returns the store, which the caller closes. An error says why it has none: the caller
// loads the history the ordinary way (LoadOperationStore), which decides as much.
func (fl *Follower) Finish() (*OperationStore, error) {
	if err := fl.wait(); err != nil {
		return nil, err
	}
	fl.taken = true
	return fl.store, nil
}

// Close stops the follower, when it has not finished, and releases the store unless Finish handed it out.
func (fl *Follower) Close() error {
	fl.end()
	if fl.store != nil && !fl.taken {
		fl.taken = true
		return fl.store.Close()
	}
	return nil
}

// FollowWatches starts passing the watch records written to run directory dir's watch file (which
// NewWriter created) to fn, in the background, until Finish or Close. Each record passed to fn is fresh
// and may be kept.
func FollowWatches(dir string, fn func(*WatchResponse)) *WatchFollower {
	return followWatches(dir, followPoll, fn)
}

func followWatches(dir string, poll time.Duration, fn func(*WatchResponse)) *WatchFollower {
	wf := &WatchFollower{}
	path := filepath.Join(dir, WatchFile)
	wf.start(path, poll, func(r io.Reader) error {
		return readWatchesFrom(path, r, nil, func() *WatchResponse { return &WatchResponse{} }, func(w *WatchResponse) error {
			fn(w)
			return nil
		})
	})
	return wf
}

// Finish tells the follower that the watch file is complete (its Writer is closed) and waits until every
// record was passed on. An error says the records passed on are not all of them.
func (wf *WatchFollower) Finish() error { return wf.wait() }

// Close stops the follower, when it has not finished, and waits for it.
func (wf *WatchFollower) Close() { wf.end() }

// followReader reads a file a writer appends to: at its end it waits for more, until finish is closed
// (then, after reading what was written until then, the end is the end) or stop is.
type followReader struct {
	f            *os.File
	finish, stop <-chan struct{}
	poll         time.Duration
	finished     bool
}

func (r *followReader) Read(p []byte) (int, error) {
	for {
		n, err := r.f.Read(p)
		if n > 0 || (err != nil && err != io.EOF) {
			return n, err
		}
		if r.finished {
			return 0, io.EOF
		}
		select {
		case <-r.finish:
			r.finished = true // read once more: what the writer wrote before it closed
		case <-r.stop:
			return 0, errFollowStopped
		case <-time.After(r.poll):
		}
	}
}
