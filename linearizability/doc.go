// Package linearizability records what clients asked etcd and what etcd answered, and checks the answers
// against etcd's guarantees: linearizability of the key-value store, the watch guarantees, and what
// serializable reads promise. Histories minutes long are checked in seconds.
//
// # Recording
//
// Every request goes through one recording wrapper (workloads.Client), which writes one Operation per
// request to history.bin: client, call and return time (nanoseconds on one monotonic clock), request,
// response (header revision, key-values, branch taken, previous values) or error. Every watch writes its
// request, etcd's confirmation (with the revision it was created at), events, progress notifications and
// cancellations to watch.bin with their arrival times (the format is package results/history's; runs before it
// wrote JSON lines, history.jsonl and watch.jsonl, which are still read). Every value written starts with a run-wide unique
// write id, so values are recorded by id and every key-value read names the write it shows.
//
// # Verdicts
//
// Check returns one verdict per check, each ok, violation, unknown (not decided in time; never a pass) or
// nothing to check (the history held nothing the check covers: no operations, no watch events or progress
// notifications, no serializable reads; the detail says which, and it is never reported as ok):
//
//   - linearizability: every answered operation (writes, linearizable reads, transactions, lease grants and
//     revokes) is consistent with one sequential execution of etcd's key-value semantics that respects real
//     time, failed and timed-out writes taking effect or not; reads below an acknowledged compaction fail;
//     leases expire no earlier than their TTL allows and cannot be used after a revoke.
//   - watch: every watcher's events are ordered, unique, atomic (a revision's events in one response),
//     reliable (no gaps), resumable (a watch from revision r starts at the first change at or after r),
//     bookmarkable (a progress notification never goes back, never precedes an event it covers), within
//     the watched range, with correct previous values and create flags, compared with the replay.
//   - serializable-reads: each is the state of the store at the revision it carries (stale is allowed),
//     never a revision whose write was sent after the read returned.
//
// A violation names the earliest global violation or the smallest failing key, with its operations (by
// number in history.bin, the line of `chaosbench history dump`), and porcupine's visualization of that key is written with fault windows marked.
//
// # Known issues, from evidence
//
// A violation of a kind the catalog of known upstream issues names (knownissues.yaml) is attributed to
// its entry only when the history proves it: the recording client stores every attempt an operation made
// on the wire (history.Operation.Attempts), and the entry says what they must show (for etcd-io/etcd#18424,
// a request applied twice: sent twice, the first send ended in DeadlineExceeded or Canceled) on a release it
// affects. Attributed violations are listed with their evidence in Report.KnownIssues, and a check whose
// every violation was attributed has the verdict "known issue"; a violation sent once, seen on a release
// the catalog marks fixed (a regression), or without recorded attempts stays a violation, and says why.
//
// # Scale by decomposition, and why it is sound
//
// Checking a whole history against a model of the whole store is what etcd's robustness suite does with
// porcupine; the search is exponential in concurrency and its memory quadratic in length, so histories must
// stay seconds long. etcd tells us more than a plain register would: every write gets a revision, every
// answer carries the revision of the state it read. The checker uses them in two layers.
//
// Global layer: the revision order. Place every answered operation in etcd's revision order: a write that
// changed the store at revision r at 2r, anything else (reads, transactions that wrote nothing, grants,
// revokes of empty leases) at 2h+1 where h is the revision its answer carries. Then check
//
//	(a) unique: no two writes claim one revision;
//	(b) real time: no operation placed later returned before an operation placed earlier was sent;
//	(c) replay: every answer equals what replaying all writes in revision order gives at its place:
//	    a range is the state of every key in it at one revision (with limit, count, more, keys-only,
//	    count-only), a paged list's pages each at their pinned revision, a transaction's compares and
//	    branch reads against the state before it, a write's previous values likewise.
//
// Claim 1: if (a), (b) and (c) hold and the revision log is complete (the writer of every revision is
// known), the history is linearizable. Order the operations by place (reads at one place in any order);
// give each the linearization point max(its call, the points before it). A point exceeds its operation's
// return only if some operation placed earlier was called after that return, which (b) excludes; so every
// point lies inside its operation's interval and the points respect real time. Executed in that order,
// etcd's sequential semantics returns exactly the recorded answers: by (c), since reads at one place see
// the same state. Conversely a correct etcd satisfies (a)–(c): revisions are the order in which writes are
// committed and applied, a linearizable read returns the state at a revision at least as new as every write
// acknowledged before it began and at most as new as what existed when it returned, and all writes of one
// transaction share one revision. So the global layer is exact: it neither misses nor invents violations.
// It is also linear: (a) and (b) are a sort and one pass, (c) one sweep over revisions with a live key
// state (a bitset and a Fenwick tree over key ranks for ranges and counts).
//
// Multi-key operations are where a per-key check is blind (linearizability is local only for single-object
// operations): a transaction writing several keys, a range over many, compares across keys. They are
// exactly what revisions pin down: a transaction's writes all take its one revision, so (c) checks every
// later range against one state of all the keys together (a torn transaction shows as a key without its
// write), and its compares against one state (two optimistic updates that both won show as a compare that
// is false at the revision before the second). Leases and compaction are global too: a revoke or expiry
// deletes all the lease's keys at one revision; a compaction is acknowledged at a time, after which no
// linearizable read below it may succeed.
//
// Failed writes. A write that failed or timed out may have taken effect, at any later time. Its unique
// value resolves it when any read, previous value or watch event shows it: it took effect at the revision
// seen, and its return time is bounded by the first sighting. Otherwise it can only hold a revision that
// no known operation wrote and that came into existence after it was sent, and only if no watcher covering
// a key it certainly changes saw nothing there; when no such revision exists it never took effect. What
// remains is undecided: it may or may not have happened, at one of those revisions. Lease expiries (and
// failed revokes) are the same kind of unseen writer.
//
// Per-key layer: porcupine, exactly where the log has holes. Where an undecided write or a lease expiry
// may have touched key k, the replay's state of k is uncertain until an answer shows k again. The replay
// then checks only what no unseen write can explain (a version older than the last known write of k is
// stale whatever happened; a record from a revision a known write made is a phantom) and takes the rest
// from the answer. Porcupine checks each key's sub-history exactly, undecided writes included: its model
// is the key's MVCC record (value id, create and mod revisions, version, lease) and, so that per-key order
// agrees with the revision order, the highest revision the key's operations have seen and written. Failed
// writes branch into applied or not (a powerset of states); a lease may expire before any operation that
// returns after its TTL since the last keep-alive. Every operation is projected on each key it reads or
// writes one by one (single-key ranges, compares, puts, deletes; a range delete on every key of its range;
// a revoke on every key ever attached to the lease), so a multi-key transaction appears in each of its
// keys' histories at the same revision, and the global layer ties those appearances together. Multi-key
// ranges are not projected: they are checked as snapshots by the replay.
//
// Claim 2: the layers together are sound and complete up to what the history can tell. Every violation
// either layer reports contradicts etcd's semantics under every possible outcome of the undecided writes
// (each layer only reports what no outcome explains). Where the log is complete, Claim 1 makes the global
// layer alone decisive. Where it is not, an anomaly confined to one key is caught by that key's porcupine
// check, which searches all outcomes; what neither layer can decide is a cross-key snapshot of keys an
// unseen write may have changed just before — counted in Stats.Uncertain and named in the verdict's detail.
//
// Porcupine's memory grows with the square of a partition's length, so a key's history is cut into
// segments of a few thousand operations at quiescent points (every earlier operation returned before the
// next began: any linearization orders them first). The next segment starts from the replay's state of the
// key there, or, where an unseen write may have touched the key, from every state it could have left.
//
// Watches are checked against the same replay: the changes of each revision as the known writer made them,
// or as the watchers saw them when the writer is unknown (watchers must agree). A watch from revision 0
// starts between the revision that existed when it was requested and the one its creation carries; etcd
// reads that one after registering the watcher, so events in between may come, and once one comes every
// later one is due.
//
// # Memory
//
// CheckDir holds the run's operations encoded, in a history.OperationStore, and decodes one each time a
// pass asks for it (a pass over every operation scans them, each decoded into the memory of the one
// before). The store keeps the records on disk, in a file without a name next to the history, and reads
// them back through a window of 64 KB per reader, which the passes, going mostly in file order, seldom
// move. Where each record is, and the distinct key-values the answers hold (each version of a key once),
// are paged arrays of the store (below): what it holds in memory beyond them is its strings (the keys,
// mostly) and, per key, the key-value read last. A record names a key-value by its key and its number,
// so a list, which shows each key's latest version page after page, finds most of its key-values in
// memory and reads the rest back; answers hand key-values out as copies, a whole list at once. A record
// or a page that cannot be read back ends the check with that error (history.ReadBackError): it decided
// nothing. What the checker needs of every operation at every turn (call and return times, revisions,
// state, and the kind of request as far as the passes that look for one kind need it) is in its opInfo.
// It does not hold the watch records.
//
// Every pass that needs the watch records (the keys and revisions they name, the watchers and what they
// vouch for, the writes they resolve, when revisions existed, the union of what watchers saw, the
// real-time evidence, the watch checks) reads watch.bin again, in file order; the file is written once
// and read the same way each time, so every pass sees the same records with the same numbers. The watch
// checks take every watcher at once, in that one order: each response is checked as it arrives, and what
// a watcher received is compared with the replay a revision at a time, as soon as an event of a later
// revision arrives, which is what comparing all of it at the end did, revision by revision, for events
// that arrive in revision order. A watcher whose events came out of order (a violation already: its later
// events' duplicates can only be told with every earlier event at hand) is checked again alone, its
// records held, exactly as before; its findings replace those of the streaming pass. Each watcher's
// findings are reported in the order the one-watcher-at-a-time check reported them, so the report is the
// same, violation for violation (Check, on a history in memory, goes through the same passes).
//
// What the checker derives per operation, per revision, per change and per watch event is in paged arrays
// (paged.go): fixed-size values without pointers, in pages of 16 KB, each array in a file of its own
// without a name next to the history, of which at most 4 MB is in memory (a clock picks the page to
// write out). That is the opInfo; the value index (who wrote each value id: each client's ids are dense,
// so one array holds them all, each client's part sized by a first pass); each revision's writer, when
// it existed, where its changes and its observed events begin, whether nobody knows what was written; the
// replay's canonical log and the previous versions it names; the union of what watchers saw and the
// places of every watch event it is built from; the answered reads by revision; the real-time order and
// its steps; the per-key checks' index and each key's changes (per key, only where its list begins).
// What is sorted is sorted in runs of what fits in memory, then merged (sortPaged). The passes go mostly
// in file order or revision order, which is about time order, so a page read back is used whole. The one
// pass that jumped about, matching every value a list returns with its write (a list shows every object,
// written any time before), remembers the values it found right lately, about two per key (a table by
// value id, two ways a set, the one met last kept), and looks at the value index and the write's info
// only for a sighting it has not met. A page that cannot be written or read ends the check with that
// error: it decided nothing. Check, on a history in memory, keeps the pages in memory.
//
// So what a check holds in memory grows with the keys (their names, ranks and replay state, each key's
// last key-value and where its lists begin, the values found right lately) and with etcd's other
// objects, the leases (kube-apiserver grants one every 10 s for its endpoint); the rest is fixed
// budgets, which a long run fills within its first hour or so (about fifteen arrays of at most 4 MB, the
// store's 5 MB, the runs being sorted, the history format's own table while the store loads, which
// starts afresh every 262,144 strings). What still grows with the run itself is small: the page tables
// (8 bytes per 16 KB page), the revisions nobody can explain (the gaps and the revisions only watchers
// saw, 8 bytes each: a few thousand in a long run with faults) and the violations found. Disk grows with
// the run: the pages are files. Operations in flight are held too: the per-key check cannot cut a key's
// operations while one may still take effect, and a write of unknown outcome to a key nobody watches may
// have taken effect at any later revision nobody explains, so that key's segment runs to the end.
//
// Measured (BenchmarkCheckDirPeakHeap: the exact live heap, two full collections in a row, at the end of
// every phase and ten times during the replay, the highest), on kubesim histories whose pods and events
// are named from 2,000 names each (kubesim -names 2000: 4,146 keys however long the run): 35.3 MB at 35
// minutes (1,085,719 operations), 42.5 MB at 70 and 45.2 MB at 140 (4,343,645 operations), about 1.3
// bytes per operation between the last two, once the budgets are full. On bench-checker's histories,
// whose keys grow as fast as their operations: 45.8 MB at 10 minutes (311,082 operations, 60,780 keys)
// and 102.9 MB at 35 (1,098,944 operations, 211,115 keys). After the per-key checks of the 35-minute one,
// 94 MB; 110 MB before the store and the value index were paged, 201 MB before the checker's own arrays
// were.
//
// The union of what watchers saw keeps, of the events of one revision and key, the first in file order
// (and within a record, the first), and holds every other one to it: before, events of one record tied
// and either could be kept; they disagree only when the record itself is a violation.
//
// A different way, for time, is a sweep in revision order with a bounded window, each operation dropped
// once the sweep and its key's porcupine segment have passed it. The passes use the
// future in ways a sweep must replace: a failed write is resolved by a sighting of its value any time
// later, a revision's existence time is the earliest of every later evidence, a lease's earliest expiry
// comes from every keep-alive, and a watcher's span runs to its last event. A first streaming pass would
// compute exactly those (and D, the longest time an answered operation took); the replay would then read
// history.bin in file order, which is return order, and check every place below the revision that existed
// at T once it has read past return time T+D; the canonical log would be trimmed below the oldest
// revision anything still needs (the slowest watcher, the oldest serializable read that may still come,
// the start of each key's open porcupine segment). Failed writes of unknown outcome and revisions no
// answered operation wrote would stay.
//
// # Checks while the load runs
//
// What the check after the load can have done for it while the load runs, without a verdict differing
// from the offline check's in any line, is what depends on the records themselves and nothing after them.
// Three parts of a check are of that kind, and a run does them as the history is written
// (--read-during-load, on by default; Follower): reading history.bin, decoding each record and encoding
// it into the store (history.OperationStore) the passes read; the first pass over the operations (opFold:
// each operation's opInfo, the leases' least lifetimes, revokes and compactions, the keys it names, the
// revisions it carries), a fold over the operations in file order; and the first pass over the watch
// records (the watchers with their requests and confirmations, the keys their events name, the highest
// revision), a fold over the records in file order. Each follower reads its file behind the writer,
// waiting at its end (a record partly written included) until the writer is closed; the check takes what
// they built (Options.Followed), which is what it would have built from the finished files: the store
// record for record (same records, same order, one encoder), the folds record for record (the same
// function of the same records; the operations folded are the ones the store holds, as decoded from the
// file rather than from the store, which gives them back exactly: history.TestOperationStore). It holds
// what the check would hold (the memory does not double: the check takes the store, the folds and their
// paged arrays instead of building its own), costs the load what they cost the check, spread over the run,
// and leaves the check after the load the records written since the followers last caught up. The
// offline check makes the same fold in one pass over the store.
//
// The other passes cannot be moved so simply, because each takes evidence from any later record: a
// failed write is resolved by a sighting of its value any time later; a revision's existence time is the
// earliest of every later evidence; whether a revision nobody wrote is a gap depends on operations that
// return later; base, which every per-revision array is indexed from, is the lowest revision any answer
// carries; a lease's earliest expiry comes from every keep-alive; a watcher's span runs to its last event;
// and the replay, the real-time order and the watch checks read those results in revision order, which is
// not the order records are written in. Checking them during the load needs the revision-order sweep
// with a bounded window (above): each fact that later evidence can change held as pending until the
// evidence comes or the history ends, every place checked once the history has passed its revision's
// existence time by D. That is a restructuring of prepare, the replay and the watch checks into
// streaming form, to be proved equal to them report line by line; it is not done.
//
// DuringLoad (--check-during-load, off by default) checks the history a run has recorded so far, again
// each time it has grown by a quarter, and keeps in Proofs every per-key segment porcupine proved
// linearizable, by a SHA-256 fingerprint of all porcupine's verdict depends on: the key, the states the
// segment starts from, each operation's every field the model reads, and what the check knows of the
// expiry of each lease the segment names. The check after the load (Options.Proofs) runs every pass as
// the offline check does and searches only the segments whose fingerprints were not proved. Porcupine's
// verdict on one segment is a function of those inputs, so a proved fingerprint is as good as the search,
// and the report is the offline check's, violation for violation: a segment the rest of the history
// changed (an operation in flight at the cut, a starting state the full replay knows better, a later
// keep-alive) has another fingerprint and is searched again; only linearizable verdicts are kept, so a
// failing segment is searched again for its report. What a check of a cut history finds decides nothing:
// answers may show writes whose operations were still in flight. A proof is 16 bytes (128 bits of the
// fingerprint), kept sorted; after each check during the load only those it met stay, and at the load's
// end they are frozen, so the check after the load holds them and nothing more than the offline check. A
// key's segment still open at a cut (shorter than segmentTarget, or with an operation of unknown outcome)
// changes at the next: keys that live all run long come proved only segment by closed segment. It is off
// by default because porcupine's searches are a small part of a check (kube-shaped segments are short),
// while each check of the history so far rereads all of it on a CPU the load could use.
//
// # Assumptions
//
// The run owns its keys: nobody else writes them while it runs (other keys may change; their revisions
// show as gaps that touch nothing we read). Keys may hold values from before the run (an external cluster):
// their first state is taken from the first answer that shows them. Times come from one monotonic clock.
package linearizability
