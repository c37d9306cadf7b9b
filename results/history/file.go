package history

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
)

// File names of a recorded history inside a run directory: the operations and the watch records, in the
// binary format of format.go. Runs of chaosbench before it wrote JSON lines (LegacyHistoryFile,
// LegacyWatchFile); every reader of this package reads both.
const (
	HistoryFile       = "history.bin"
	WatchFile         = "watch.bin"
	LegacyHistoryFile = "history.jsonl"
	LegacyWatchFile   = "watch.jsonl"
)

// HistoryPath returns the path of the operations file of run directory dir, binary or legacy JSON lines,
// and an error wrapping fs.ErrNotExist when the directory has neither.
func HistoryPath(dir string) (string, error) {
	return existing(dir, HistoryFile, LegacyHistoryFile)
}

// WatchPath returns the path of the watch file of run directory dir, as HistoryPath does.
func WatchPath(dir string) (string, error) {
	return existing(dir, WatchFile, LegacyWatchFile)
}

func existing(dir string, names ...string) (string, error) {
	for _, n := range names {
		p := filepath.Join(dir, n)
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: no %s: %w", dir, names[0], fs.ErrNotExist)
}

// Writer appends operations and watch responses to a run directory's history files. It is safe for
// concurrent use and keeps nothing of what it is given. A record is encoded into a buffer under a lock
// (a few hundred nanoseconds, no allocation); full buffers go to the Writer's own goroutine, so the
// callers, the load generator's request path, never wait for the disk unless it falls several
// megabytes behind. The first write error is kept and returned by Close.
type Writer struct {
	mu      sync.Mutex
	ops     *binFile
	watches *binFile
	closed  bool // records that arrive after Close (a watch's last response racing the run's end) are dropped

	chunks chan chunk
	free   chan []byte
	done   chan struct{}

	errMu sync.Mutex
	err   error
}

type binFile struct {
	f   *os.File
	enc *encoder
	buf []byte
}

// chunk is a buffer of records for the writer goroutine, or with synced set, a request to report when
// everything before it is written.
type chunk struct {
	f      *os.File
	data   []byte
	synced chan struct{}
}

const (
	writeBuffer = 256 << 10
	// writeQueue bounds the buffers waiting for the disk: past it, writers wait rather than grow memory.
	writeQueue = 16
)

func createBin(path string, content byte) (*binFile, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create history file: %w", err)
	}
	buf := make([]byte, 0, writeBuffer)
	return &binFile{f: f, enc: newEncoder(), buf: append(buf, fileHeader(content)...)}, nil
}

// NewWriter creates the history files in dir.
func NewWriter(dir string) (*Writer, error) {
	ops, err := createBin(filepath.Join(dir, HistoryFile), contentOperations)
	if err != nil {
		return nil, err
	}
	watches, err := createBin(filepath.Join(dir, WatchFile), contentWatches)
	if err != nil {
		return nil, errors.Join(err, ops.f.Close())
	}
	w := &Writer{ops: ops, watches: watches, chunks: make(chan chunk, writeQueue), free: make(chan []byte, writeQueue+2), done: make(chan struct{})}
	go w.write()
	return w, nil
}

// write is the Writer's goroutine: it writes the chunks in the order they were queued.
func (w *Writer) write() {
	defer close(w.done)
	for c := range w.chunks {
		if c.synced != nil {
			close(c.synced)
			continue
		}
		if _, err := c.f.Write(c.data); err != nil {
			w.fail(err)
		}
		select {
		case w.free <- c.data[:0]:
		default:
		}
	}
}

func (w *Writer) fail(err error) {
	w.errMu.Lock()
	defer w.errMu.Unlock()
	if w.err == nil {
		w.err = err
	}
}

// Operation appends one operation.
func (w *Writer) Operation(op *Operation) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	f := w.ops
	f.buf = f.enc.appendReset(f.buf)
	f.enc.scratch = f.enc.operation(f.enc.scratch[:0], op)
	f.buf = appendRecord(f.buf, f.enc.scratch)
	w.spill(f, writeBuffer)
}

// Watch appends one watch response.
func (w *Writer) Watch(r *WatchResponse) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return
	}
	f := w.watches
	f.buf = f.enc.appendReset(f.buf)
	f.enc.scratch = f.enc.watch(f.enc.scratch[:0], r)
	f.buf = appendRecord(f.buf, f.enc.scratch)
	w.spill(f, writeBuffer)
}

// spill hands f's buffer to the writer goroutine once it holds at least limit bytes. Called with w.mu held.
func (w *Writer) spill(f *binFile, limit int) {
	if len(f.buf) < limit || len(f.buf) == 0 {
		return
	}
	w.chunks <- chunk{f: f.f, data: f.buf}
	select {
	case f.buf = <-w.free:
	default:
		f.buf = make([]byte, 0, writeBuffer)
	}
}

// Flush writes buffered records to the files, so that a reader sees everything written so far.
func (w *Writer) Flush() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.spill(w.ops, 1)
	w.spill(w.watches, 1)
	synced := make(chan struct{})
	w.chunks <- chunk{synced: synced}
	w.mu.Unlock()
	<-synced
	w.errMu.Lock()
	defer w.errMu.Unlock()
	return w.err
}

// Close flushes and closes both files and returns the first error met while writing. Records written
// after Close are dropped; closing again does nothing.
func (w *Writer) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.spill(w.ops, 1)
	w.spill(w.watches, 1)
	close(w.chunks)
	w.mu.Unlock()
	<-w.done
	err := errors.Join(w.err, w.ops.f.Close(), w.watches.f.Close())
	if err != nil {
		return fmt.Errorf("write history: %w", err)
	}
	return nil
}

// ReadOperations streams the operations of a history file (binary or legacy JSON lines) to fn, in file
// order. Each operation passed to fn is fresh and may be kept.
func ReadOperations(path string, fn func(*Operation) error) error {
	return readOperations(path, nil, false, func() *Operation { return &Operation{} }, fn)
}

// ReadWatches streams the watch responses of a watch file (binary or legacy JSON lines) to fn, in file
// order. Each response passed to fn is fresh and may be kept.
func ReadWatches(path string, fn func(*WatchResponse) error) error {
	return readWatches(path, nil, func() *WatchResponse { return &WatchResponse{} }, fn)
}

// readOperations decodes each operation into a zero Operation from slot, then passes it to fn. With a
// table, large range answers are packed into it (see RangeResponse). With reuse, each operation's parts
// are carved from the memory of the one before (see decoder.reuse): fn must not keep them.
func readOperations(path string, table *kvTable, reuse bool, slot func() *Operation, fn func(*Operation) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open history: %w", err)
	}
	defer f.Close()
	return readOperationsFrom(path, f, table, reuse, slot, fn)
}

// readOperationsFrom is readOperations on r, the content of the file at path.
func readOperationsFrom(path string, r io.Reader, table *kvTable, reuse bool, slot func() *Operation, fn func(*Operation) error) error {
	return readStream(path, r, contentOperations, table, reuse, func(d *decoder, rec []byte) error {
		op := slot()
		if err := d.operation(rec, op); err != nil {
			return err
		}
		return fn(op)
	}, func(dec *json.Decoder) error {
		op := slot()
		if err := dec.Decode(op); err != nil {
			return err
		}
		return fn(op)
	})
}

// readWatches decodes each watch response into a zero WatchResponse from slot, then passes it to fn. With
// a table, previous key-values are shared through it (see decoder.sharedKV).
func readWatches(path string, table *kvTable, slot func() *WatchResponse, fn func(*WatchResponse) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open history: %w", err)
	}
	defer f.Close()
	return readWatchesFrom(path, f, table, slot, fn)
}

// readWatchesFrom is readWatches on r, the content of the file at path.
func readWatchesFrom(path string, r io.Reader, table *kvTable, slot func() *WatchResponse, fn func(*WatchResponse) error) error {
	return readStream(path, r, contentWatches, table, false, func(d *decoder, rec []byte) error {
		r := slot()
		if err := d.watch(rec, r); err != nil {
			return err
		}
		return fn(r)
	}, func(dec *json.Decoder) error {
		r := slot()
		if err := dec.Decode(r); err != nil {
			return err
		}
		return fn(r)
	})
}

// readStream reads a history file, whose content r is, record by record: the binary format with binary,
// legacy JSON lines with legacy. With reuse, the decoder carves each record's parts from the memory of the
// one before.
func readStream(path string, r io.Reader, content byte, table *kvTable, reuse bool, binary func(*decoder, []byte) error, legacy func(*json.Decoder) error) error {
	br := bufio.NewReaderSize(r, 1<<20)
	head, _ := br.Peek(headerSize)
	if !bytes.HasPrefix(head, []byte(formatMagic)) {
		return readJSONL(path, br, legacy)
	}
	got, err := checkHeader(head)
	if err != nil {
		return fmt.Errorf("read %s: %w", filepath.Base(path), err)
	}
	if got != content {
		return fmt.Errorf("read %s: %w: it holds %q records, not %q", filepath.Base(path), errFormat, got, content)
	}
	br.Discard(headerSize)
	d := newDecoder()
	d.table = table
	n := 0
	err = readRecords(br, func(rec []byte) error {
		if len(rec) == 0 {
			d.reset()
			return nil
		}
		n++
		if reuse {
			d.reuse()
		}
		if err := binary(d, rec); err != nil {
			return fmt.Errorf("record %d: %w", n, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("read %s: %w", filepath.Base(path), err)
	}
	return nil
}

// readRecords passes each length-delimited record of r to fn. The slice is only valid during the call. A
// record cut short by the end of the file (a run killed while writing) ends the file without an error.
func readRecords(r *bufio.Reader, fn func([]byte) error) error {
	var big []byte
	for {
		n, err := binary.ReadUvarint(r)
		if err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return nil
			}
			return err
		}
		if n > 1<<30 {
			return fmt.Errorf("%w: record of %d bytes", errFormat, n)
		}
		var rec []byte
		if int(n) <= r.Size() {
			// Most records fit the reader's buffer: decode them in place.
			if rec, err = r.Peek(int(n)); err != nil {
				if err == io.EOF {
					return nil
				}
				return err
			}
		} else {
			// Grow with what arrives, not with what the length claims: a corrupt length must not allocate
			// a gigabyte.
			buf := bytes.NewBuffer(big[:0])
			if _, err := io.CopyN(buf, r, int64(n)); err != nil {
				if err == io.EOF {
					return nil
				}
				return err
			}
			big = buf.Bytes()
			rec = big
		}
		if err := fn(rec); err != nil {
			return err
		}
		if int(n) <= r.Size() {
			r.Discard(int(n))
		}
	}
}

// countRecords returns the number of records of a binary history file, reading only their lengths, so
// that a reader that keeps them all can allocate once. It returns 0 for a legacy file.
func countRecords(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("open history: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 1<<20)
	if head, _ := br.Peek(headerSize); !bytes.HasPrefix(head, []byte(formatMagic)) {
		return 0, nil
	}
	br.Discard(headerSize)
	count := 0
	for {
		n, err := binary.ReadUvarint(br)
		if err != nil {
			return count, nil
		}
		if d, _ := br.Discard(int(min(n, 1<<30))); uint64(d) < n {
			return count, nil // a torn last record
		}
		if n > 0 { // not a fresh start
			count++
		}
	}
}

// readJSONL reads a legacy JSON-lines history with encoding/json.
func readJSONL(path string, r io.Reader, next func(*json.Decoder) error) error {
	dec := json.NewDecoder(r)
	for dec.More() {
		if err := next(dec); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				// A run killed mid-write leaves a torn last line; everything before it is valid.
				return nil
			}
			return fmt.Errorf("read %s: %w", filepath.Base(path), err)
		}
	}
	return nil
}
