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
// before). The store keeps the records on disk, in a file without a name next to the history, and holds
// only the strings and key-values they share and where each record is: about 50 bytes per operation of a
// kube-shaped history, against 105 with the records in memory and 550 decoded. It reads them back through
// a window of 64 KB per reader, which the passes, going mostly in file order, seldom move. A record that
// cannot be read back ends the check with that error (history.ReadBackError): it decided nothing. What it
// needs of every operation at every turn (call and return times, revisions, state, and the kind of
// request as far as the passes that look for one kind need it) is in its opInfo. It does not hold the
// watch records.
//
// What the checker derives per operation (the opInfo), per revision (its writer, when it existed, where
// its changes begin in the canonical log, whether nobody knows what was written) and per change (the
// replay's canonical log, and the previous versions it names) is in paged arrays (paged.go): fixed-size
// values without pointers, in pages of 16 KB, each array in a file of its own without a name next to the
// history, of which at most 4 MB is in memory (a clock picks the page to write out). The passes go mostly
// in file order or revision order, which is about time order, so a page read back is used whole. The one
// pass that jumped about, matching every value a list returns with its write (a list shows every object,
// written any time before), remembers in the value index which values it found right at which revision,
// and looks at a write's info again only for a sighting it has not met. A page that cannot be written or
// read ends the check with that error: it decided nothing. Check, on a history in memory, keeps the pages
// in memory. Every pass that needs them (the keys and revisions they name, the watchers and
// what they vouch for, the writes they resolve, when revisions existed, the union of what watchers saw,
// the real-time evidence, the watch checks) reads watch.bin again, in file order; the file is written once
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
// What still grows with the run, and by how much (kube-shaped histories: about 0.6 revisions and 0.7
// changes per operation, 1.8 watch events per operation):
//
//   - the operations: where each one's record is in the store (8 bytes; the record itself, about 47, is on
//     disk) and the distinct key-values its answers hold (the store's, once: about 27 bytes per operation),
//     the answered reads by revision for the replay (8 bytes), the real-time order (16 bytes per operation
//     placed, and 24 per place where the latest call rises, while it is checked; the watch records are
//     compared with it as watch.bin is read, not held), the per-key checks' index (4 bytes per operation
//     and key it projects on) and, while values are matched with writes, the value index (32 bytes per
//     value written). This is linear in the number of operations: the global layer replays writes in
//     revision order and the per-key layer checks whole key histories, and both look up operations by
//     number at any time;
//   - the revisions: where each one's observed events begin (4 bytes), each key's changes for the
//     per-key checks (4 bytes per change) and, until the writers are known, the union of
//     what watchers saw (about 150 bytes per revision and key any watcher saw; then only the revisions
//     nobody is known to have written stay, for the replay);
//   - while the union is built, 24 bytes per watch event, released before the replay.
//
// What no longer grows with the run: the decoded watch records and events (about half of a loaded kube
// history), of which the check holds at most the events of one revision per watcher, plus the records of
// watchers whose events came out of order; the operations' records, on disk; what the checker derives
// per operation, per revision and per change, in paged arrays (about 100 bytes per operation of a
// kube-shaped history, in files, with at most 4 MB of each array in memory); the per-key checks'
// projections, 8,000 operations at a time. The keys (their names, ranks and replay state) grow with the
// number of keys, not the run's length. For kube-shaped histories the peak live heap is about 300 bytes
// per operation (1.4 KB when the watch records were held, 950 bytes when the operations were held
// decoded, 500 with their records in memory): still linear.
//
// The union of what watchers saw keeps, of the events of one revision and key, the first in file order
// (and within a record, the first), and holds every other one to it: before, events of one record tied
// and either could be kept; they disagree only when the record itself is a violation.
//
// Not done yet, and why it is harder: holding only the keys and the operations in flight means sweeping
// the operations in revision order with a bounded window and dropping each once the sweep and its key's
// porcupine segment have passed it. The passes above use the future in ways a sweep must replace: a
// failed write is resolved by a sighting of its value any time later, a revision's existence time is the
// earliest of every later evidence, a lease's earliest expiry comes from every keep-alive, and a
// watcher's span runs to its last event. Failed writes of unknown outcome and watchers that lag far behind
// would then bound memory (every revision since the oldest of them).
//
// The way we mean to take (the 35-minute history's live heap peaked at about 340 MB, in the real-time
// check, and is now about 300 MB, in the replay, with the real-time check at 275 MB and the per-key
// checks, 8,000 operations projected at a time, at 290 MB: the opInfo 50 MB (67 at 64 bytes), the
// canonical log 49 MB, the store's key-values and strings 45 MB, where its records are 9 MB, per revision
// and per key the rest, and the replay's own state):
//
//   - a first streaming pass over both files computes what the passes above look ahead for, and only that:
//     the outcome of each failed write (a later sighting of its value), each revision's existence time,
//     each lease's earliest expiry, each watcher's last event, and D, the longest time an answered
//     operation took. It holds the failed writes and a few bytes per revision.
//   - the replay then reads history.bin again in file order, which is return order (an operation is
//     recorded when it returns). An answered operation that returns after T+D was sent after T, so its
//     place is at least the revision that existed at T. Once the read has passed return time T+D, every
//     place below that revision has been read, and the sweep can check and drop it. The window is what
//     was in flight during D.
//   - the canonical log is trimmed below the oldest revision anything still needs: the slowest watcher,
//     the oldest serializable read that may still come (stale by at most what a partition allows), and
//     the start of each key's open porcupine segment.
//   - the per-key checks take each key's segment as the sweep closes it.
//
// Failed writes of unknown outcome stay. So do revisions no answered operation wrote: a lease expiry, or
// a failed write that may have taken one.
//
// # Assumptions
//
// The run owns its keys: nobody else writes them while it runs (other keys may change; their revisions
// show as gaps that touch nothing we read). Keys may hold values from before the run (an external cluster):
// their first state is taken from the first answer that shows them. Times come from one monotonic clock.
package linearizability
