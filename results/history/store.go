package history

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// OperationStore holds a run's operations for a reader that looks them up by number at any time (the
// consistency checker), encoded, and decodes one each time it is asked for it. Decoded, a kube-shaped
// history's operations take about 550 bytes each; held here, about a sixth of that, and loaded from a run
// directory, what it holds in memory grows with the keys, not with the operations.
//
// Each record is the file format's (format.go) with a different state behind it, so that any record can be
// decoded alone: the strings and the distinct key-values of the whole history are held once, in the store
// (storekv.go), and a record names them by number; times and revisions are written whole instead of as
// deltas from the record before. A store only grows while it is loaded, and is read-only, and safe for
// concurrent readers, afterwards.
//
// A store loaded from a run directory keeps its records on disk, in a file of its own that has no name
// (it is removed as soon as it is created, so that nothing is left behind however the process ends), and
// reads each one back when it is asked for; where each record is and the distinct key-values are paged
// arrays (Paged) in two more such files, of which at most 1 and 4 MB are in memory. The process holds
// the strings and each key's key-value read last; the records are the operating system's to cache or to
// drop. Close releases the files.
type OperationStore struct {
	res    *resident
	chunks [][]byte       // the records, in memory; nil when they are spilled
	spill  *os.File       // the records, when they are on disk: chunk c at starts[c]
	starts []int64        // spilled: where each chunk starts in spill, and where the last one ends
	at     *Paged[uint64] // chunk<<32 | offset of each record: a record never spans two chunks
	atMu   sync.Mutex     // at's pages move even when it is read
	window int64          // storeWindow; less in tests

	decoders sync.Pool
}

// ReadBackError is what a store's At and Scan, and a Paged array's Get and Set, panic with when what they
// keep on disk cannot be written or read back: they return no error, and an operation or a value that
// was not read must never be taken for one. A caller that must not crash (the checker) recovers it and
// fails with it.
type ReadBackError struct{ Err error }

func (e *ReadBackError) Error() string { return "on disk: " + e.Err.Error() }

// Unwrap returns the error of the read, write or file that failed.
func (e *ReadBackError) Unwrap() error { return e.Err }

// storeChunk is the size of the chunks records are appended to: large enough that the last, partly
// filled one does not matter, small enough that growing the store never copies much.
const storeChunk = 1 << 20

// LoadOperationStore reads the operations of run directory dir (binary, or a legacy run's JSON lines)
// into a store that keeps its records on disk: in dir, where the history is (not in a temporary directory,
// which may be held in memory), or, when dir cannot be written, in the temporary directory. The caller
// closes the store.
func LoadOperationStore(dir string) (*OperationStore, error) {
	path, err := HistoryPath(dir)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open history: %w", err)
	}
	defer f.Close()
	return buildStore(dir, storeSizes{}, path, f, nil)
}

// buildStore reads the operations of r, the content of the history file at path, into a store that keeps
// its records in files in dir, and passes each to fold, when set, with its number in the store.
func buildStore(dir string, sizes storeSizes, path string, r io.Reader, fold func(i int, op *Operation)) (_ *OperationStore, err error) {
	b, err := newStoreBuilder(dir, true, sizes)
	if err != nil {
		return nil, err
	}
	defer func() {
		// A page of the store's paged arrays that could not be written out panics (ReadBackError).
		if p := recover(); p != nil {
			rb, ok := p.(*ReadBackError)
			if !ok {
				panic(p)
			}
			err = fmt.Errorf("operation store: %w", rb)
		}
		if err != nil {
			b.s.Close()
		}
	}()
	var op Operation
	err = readOperationsFrom(path, r, nil, true, func() *Operation { // each is encoded before the next is read
		op = Operation{}
		return &op
	}, func(op *Operation) error {
		b.add(op)
		if fold != nil {
			fold(b.s.Len()-1, op)
		}
		return b.err // a chunk that could not be written out ends the load
	})
	if err == nil {
		err = b.flush()
	}
	if err != nil {
		return nil, err
	}
	return b.done(), nil
}

// SpillFile creates a file to keep what does not fit in memory in (a store's records, a checker's
// indexes), in dir or else in the temporary directory, and removes its name at once: it goes when it is
// closed or the process ends, whatever way that happens. name names it while it has a name
// (".chaosbench-<name>-*").
func SpillFile(dir, name string) (*os.File, error) {
	f, err := os.CreateTemp(dir, ".chaosbench-"+name+"-*")
	if err != nil {
		var err2 error
		if f, err2 = os.CreateTemp("", "chaosbench-"+name+"-*"); err2 != nil {
			return nil, fmt.Errorf("spill file: %w", errors.Join(err, err2))
		}
	}
	if err := os.Remove(f.Name()); err != nil {
		f.Close()
		return nil, fmt.Errorf("spill file: %w", err)
	}
	return f, nil
}

// NewOperationStore returns a store of ops.
func NewOperationStore(ops []Operation) *OperationStore {
	b, _ := newStoreBuilder("", false, storeSizes{}) // creates no file: cannot fail
	for i := range ops {
		b.add(&ops[i])
	}
	return b.done()
}

// storeBuilder encodes operations into a store, in order. When the store spills, each chunk is written
// out when the next one begins, and its memory reused.
type storeBuilder struct {
	s     *OperationStore
	enc   *encoder
	rec   []byte
	chunk int // storeChunk; less in tests
	err   error
}

// storeSizes are the sizes of a store's paged arrays; zero ones are the defaults (storeKVBudget,
// storeIndexBudget, PageBytes). Tests take less, to read pages back all the time.
type storeSizes struct{ kvBudget, indexBudget, pageBytes int }

// newStoreBuilder returns a builder of a store that keeps its records, where they are and its key-values
// in files in dir when it spills, and everything in memory otherwise.
func newStoreBuilder(dir string, spill bool, sizes storeSizes) (*storeBuilder, error) {
	var files [3]*os.File
	if spill {
		for i, name := range []string{"operations", "operation-index", "key-values"} {
			f, err := SpillFile(dir, name)
			if err != nil {
				for _, f := range files[:i] {
					f.Close()
				}
				return nil, err
			}
			files[i] = f
		}
	}
	kvs := NewPaged[storedKV](files[2], 0, cmp.Or(sizes.kvBudget, storeKVBudget), sizes.pageBytes)
	at := NewPaged[uint64](files[1], 0, cmp.Or(sizes.indexBudget, storeIndexBudget), sizes.pageBytes)
	res := newResident(kvs)
	s := &OperationStore{res: res, spill: files[0], at: at, window: storeWindow}
	return &storeBuilder{s: s, enc: &encoder{res: res}, chunk: storeChunk}, nil
}

// storeKVBudget and storeIndexBudget are how much of a spilled store's key-values and of where its
// records are is in memory at most. The key-values lists read again are each key's last, held apart.
const (
	storeKVBudget    = 4 << 20
	storeIndexBudget = 1 << 20
)

func (b *storeBuilder) add(op *Operation) {
	b.enc.prevTime, b.enc.prevRev, b.enc.prevRef = 0, 0, storeRef{}
	b.rec = b.enc.operation(b.rec[:0], op)
	s := b.s
	n := len(s.chunks)
	if n == 0 || len(s.chunks[n-1])+len(b.rec) > cap(s.chunks[n-1]) {
		if n > 0 && s.spill != nil {
			last := s.chunks[n-1]
			b.writeChunk(last)
			s.chunks[n-1] = nil
			if cap(last) >= len(b.rec) {
				s.chunks = append(s.chunks, last[:0])
			}
		}
		if len(s.chunks) == n {
			s.chunks = append(s.chunks, make([]byte, 0, max(b.chunk, len(b.rec))))
		}
		n++
	}
	s.at.Add(uint64(n-1)<<32 | uint64(len(s.chunks[n-1])))
	s.chunks[n-1] = append(s.chunks[n-1], b.rec...)
}

// writeChunk appends a full chunk to the spill file.
func (b *storeBuilder) writeChunk(chunk []byte) {
	s := b.s
	if len(s.starts) == 0 {
		s.starts = append(s.starts, 0)
	}
	end := s.starts[len(s.starts)-1]
	if b.err == nil {
		if _, err := s.spill.WriteAt(chunk, end); err != nil {
			b.err = fmt.Errorf("operation store: %w", err)
		}
	}
	s.starts = append(s.starts, end+int64(len(chunk)))
}

// flush writes the last chunk out, when the store spills, and returns the first write that failed.
func (b *storeBuilder) flush() error {
	s := b.s
	if s.spill != nil && len(s.chunks) > 0 {
		b.writeChunk(s.chunks[len(s.chunks)-1])
		s.chunks = nil
	}
	return b.err
}

func (b *storeBuilder) done() *OperationStore {
	s := b.s
	s.res.ids, s.res.recent = nil, nil
	s.decoders.New = func() any {
		d := newDecoder()
		d.res = s.res
		return d
	}
	return s
}

// Len returns the number of operations.
func (s *OperationStore) Len() int { return s.at.Len() }

// Close releases the files a store loaded from a run directory keeps its records, where they are and its
// key-values in, and the memory of its paged arrays. Nothing can be read from the store afterwards.
func (s *OperationStore) Close() error {
	s.at.Close()
	s.res.kvs.Close()
	if s.spill == nil {
		return nil
	}
	return s.spill.Close()
}

// DiskBytes returns the size of the records a store keeps on disk (0 for one that holds them in memory).
func (s *OperationStore) DiskBytes() int64 {
	if s.spill == nil || len(s.starts) == 0 {
		return 0
	}
	return s.starts[len(s.starts)-1]
}

// fail panics with a ReadBackError: see ReadBackError.
func (s *OperationStore) fail(err error) {
	panic(&ReadBackError{Err: err})
}

// chunkLen returns the length of chunk c.
func (s *OperationStore) chunkLen(c uint64) uint32 {
	if s.spill != nil {
		return uint32(s.starts[c+1] - s.starts[c])
	}
	return uint32(len(s.chunks[c]))
}

// index returns where records i and i+1 are (0 for the one after the last).
func (s *OperationStore) index(i int) (at, next uint64) {
	s.atMu.Lock()
	defer s.atMu.Unlock() // a page that cannot be read back panics: the next reader must not wait forever
	at = s.at.Get(i)
	if i+1 < s.at.Len() {
		next = s.at.Get(i + 1)
	}
	return at, next
}

// record returns where record i is: its chunk, and its start and end in it.
func (s *OperationStore) record(i int) (chunk uint64, off, end uint32) {
	at, next := s.index(i)
	chunk, off = at>>32, uint32(at)
	end = s.chunkLen(chunk)
	if i+1 < s.at.Len() && next>>32 == chunk {
		end = uint32(next)
	}
	return chunk, off, end
}

// bytes returns record i: in memory, or from disk through d's window on the file, which is moved (read
// again) when the record is not in it. The checker mostly asks for operations after the one before, but
// sometimes for one a little before it: a window starts a quarter of its size before the record.
func (s *OperationStore) bytes(i int, d *decoder) []byte {
	chunk, off, end := s.record(i)
	if s.spill == nil {
		return s.chunks[chunk][off:end]
	}
	pos, n := s.starts[chunk]+int64(off), int64(end-off)
	if w := &d.window; pos < w.at || pos+n > w.at+int64(len(w.b)) {
		at := max(pos-s.window/4, 0)
		size := min(max(pos+n-at, s.window), s.starts[len(s.starts)-1]-at)
		if int64(cap(w.b)) < size {
			w.b = make([]byte, size)
		}
		w.at, w.b = at, w.b[:size]
		if _, err := s.spill.ReadAt(w.b, at); err != nil {
			w.b = w.b[:0]
			s.fail(err)
		}
	}
	start := pos - d.window.at
	return d.window.b[start : start+n]
}

// storeWindow is how much of a spilled store's file a decoder reads at once: about a thousand records.
const storeWindow = 64 << 10

// Scan decodes the operations in order, each into the memory of the one before, and calls fn with each:
// the operation and its parts are valid only during the call, but for the key-values it refers to, which
// the store shares. A pass over every operation allocates nothing per operation this way, but for answers
// of more than a hundred key-values, whose references get a slice of their own.
//
// A spilled store is read a chunk at a time; a read that fails panics with a ReadBackError.
func (s *OperationStore) Scan(fn func(i int, op *Operation)) {
	d := newDecoder()
	d.res = s.res
	var op Operation
	var buf []byte
	loaded := ^uint64(0)
	for i := range s.Len() {
		d.reuse()
		d.prevTime, d.prevRev, d.prevRef = 0, 0, storeRef{}
		op = Operation{}
		chunk, off, end := s.record(i)
		if s.spill == nil {
			buf = s.chunks[chunk]
		} else if chunk != loaded {
			buf = buf[:cap(buf)]
			if n := int(s.chunkLen(chunk)); len(buf) < n {
				buf = make([]byte, n)
			} else {
				buf = buf[:n]
			}
			loaded = chunk
			if _, err := s.spill.ReadAt(buf, s.starts[chunk]); err != nil {
				s.fail(err)
			}
		}
		if err := d.operation(buf[off:end], &op); err != nil {
			panic(fmt.Sprintf("history: operation %d of a store: %v", i, err))
		}
		fn(i, &op)
	}
}

// At decodes operation i. The operation is the caller's, but for the key-values it refers to, which the
// store shares among all of its operations: they must not be changed. Its range answers hold their
// key-values packed (see RangeResponse: KVs is nil).
//
// For a spilled store, a record outside the reader's window is read from disk (the operating system's
// cache, mostly); a read that fails panics with a ReadBackError.
func (s *OperationStore) At(i int) *Operation {
	d := s.decoders.Get().(*decoder)
	defer s.decoders.Put(d)
	d.prevTime, d.prevRev, d.prevRef = 0, 0, storeRef{}
	op := d.ops.one()
	if err := d.operation(s.bytes(i, d), op); err != nil {
		// The store wrote the record itself: failing to read it back is a bug, not bad input.
		panic(fmt.Sprintf("history: operation %d of a store: %v", i, err))
	}
	return op
}
