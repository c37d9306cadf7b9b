package linearizability

// The watch records, read pass by pass. A run's watchers receive more events than its clients send
// requests, and each decoded event costs a hundred bytes or more; holding them all for the whole check
// made the check's memory grow with the run. The checker instead reads the watch file again for every
// pass that needs the records, and keeps only what the passes derive (see the package documentation for
// what that is and how it grows).

import (
	"fmt"

	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// watchLog is where the checker reads the run's watch records from: a history in memory (Check) or the
// watch file of a run directory (CheckDir), which is decoded again for every pass.
type watchLog struct {
	records []history.WatchResponse
	path    string // when set, the records are read from this file
	// holdAll checks every watcher from its records held, as one whose events came out of order is: the
	// tests hold the streaming watch checks to what the held ones find.
	holdAll bool
}

// eachWatch calls fn with every watch record and its number (its index in file order), in file order. A
// record passed to fn is the caller's until fn returns; it may be kept when the log is a file (every read
// decodes fresh records). The first read error stops this and every later pass; Check returns it.
func (c *checker) eachWatch(fn func(i int32, r *history.WatchResponse)) {
	if c.readErr != nil {
		return
	}
	if c.wl.path == "" {
		for i := range c.wl.records {
			fn(int32(i), &c.wl.records[i])
		}
		return
	}
	var i int32
	err := history.ReadWatches(c.wl.path, func(r *history.WatchResponse) error {
		if c.stop != nil && i&4095 == 0 && c.stop() {
			panic(errStopped)
		}
		fn(i, r)
		i++
		return nil
	})
	if err != nil {
		c.readErr = fmt.Errorf("read the watch records again: %w", err)
	}
}

// isRequestRecord reports whether a watch record is only the watch's request: it carries nothing the
// watch checks look at.
func isRequestRecord(r *history.WatchResponse) bool {
	return r.Request != nil && r.Revision == 0 && !r.Created && len(r.Events) == 0 && !r.Progress && !r.Canceled && r.CompactRevision == 0
}
