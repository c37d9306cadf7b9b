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
	finish chan struct{} // closed by Finish: the writer is closed, the file complete
	stop   chan struct{} // closed by Close: give up
	done   chan struct{} // closed when the goroutine ends
	once   sync.Once     // closes finish
	halt   sync.Once     // closes stop

	store *OperationStore // set when the goroutine ends without an error
	err   error
	taken bool // Finish handed the store out: Close leaves it to the caller
}

// followPoll is how long a follower waits at the end of the file before it looks again.
const followPoll = 250 * time.Millisecond

// errFollowStopped is how a follower's reads end when it is closed before the file is complete.
var errFollowStopped = errors.New("history follower closed")

// FollowOperations starts reading the operations written to run directory dir's history file (which
// NewWriter created) into a store, in the background, until Finish or Close. The store keeps its records in
// files in dir, as LoadOperationStore's does.
func FollowOperations(dir string) *Follower {
	return followOperations(dir, followPoll, storeSizes{})
}

func followOperations(dir string, poll time.Duration, sizes storeSizes) *Follower {
	fl := &Follower{finish: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(fl.done)
		fl.store, fl.err = fl.load(dir, poll, sizes)
	}()
	return fl
}

func (fl *Follower) load(dir string, poll time.Duration, sizes storeSizes) (*OperationStore, error) {
	path := filepath.Join(dir, HistoryFile)
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("follow history: %w", err)
	}
	defer f.Close()
	return buildStore(dir, sizes, path, &followReader{f: f, finish: fl.finish, stop: fl.stop, poll: poll})
}

// Finish tells the follower that the history file is complete (its Writer is closed), waits for it to
// read the rest and returns the store, which the caller closes. An error says why it has none: the caller
// loads the history the ordinary way (LoadOperationStore), which decides as much.
func (fl *Follower) Finish() (*OperationStore, error) {
	fl.once.Do(func() { close(fl.finish) })
	<-fl.done
	if fl.err != nil {
		return nil, fl.err
	}
	fl.taken = true
	return fl.store, nil
}

// Close stops the follower, when it has not finished, and releases the store unless Finish handed it out.
func (fl *Follower) Close() error {
	fl.halt.Do(func() { close(fl.stop) }) // after Finish, the goroutine has ended: nothing to stop
	<-fl.done
	if fl.store != nil && !fl.taken {
		fl.taken = true
		return fl.store.Close()
	}
	return nil
}

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
