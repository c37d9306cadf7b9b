// Package history is the vocabulary of what clients asked etcd and what etcd answered, and its file
// format: the data the load writes and the consistency checks read.
//
// A Request (range, put, delete, transaction, lease grant, revoke and keep-alive, compaction) and its
// Response, or its error, make one Operation, with its client and its call and return times (nanoseconds
// on one monotonic clock). A WatchRequest's confirmation, events, progress notifications and cancellation
// make WatchResponses, with their arrival times. Every value written starts with a run-wide unique write
// id (EncodeValue), so values are recorded by id and every key-value read names the write it shows.
//
// A Writer streams operations to history.bin and watch records to watch.bin, off the request path, in a
// compact, versioned binary format (format.go; results/SCHEMA.md describes it). ReadOperations and
// ReadWatches stream them back; Load reads a whole run; LoadOperationStore holds a run's operations encoded,
// each decoded when asked for (what the checker looks them up in); Dump prints a file as JSON lines and
// ConvertDir rewrites a legacy run's JSON lines (history.jsonl, watch.jsonl) in the binary format.
//
// The package sits at the bottom of the layers: the workloads that record, the checks that read
// (package linearizability) and the reports all import it, and it imports nothing of the project's.
package history
