package linearizability

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
)

// File names of a recorded history inside a run directory.
const (
	HistoryFile = "history.jsonl"
	WatchFile   = "watch.jsonl"
)

// Writer appends operations and watch responses to a run directory's history files, as JSON lines.
// It is safe for concurrent use; the first write error is kept and returned by Close.
type Writer struct {
	mu      sync.Mutex
	ops     *jsonlFile
	watches *jsonlFile
}

type jsonlFile struct {
	f       *os.File
	buf     *bufio.Writer
	scratch []byte
	err     error
}

func createJSONL(path string) (*jsonlFile, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("create history file: %w", err)
	}
	return &jsonlFile{f: f, buf: bufio.NewWriterSize(f, 1<<20)}, nil
}

// line writes one encoded record and a newline; scratch is reused between records.
func (j *jsonlFile) line(b []byte) {
	j.scratch = b[:0]
	if j.err == nil {
		if _, err := j.buf.Write(append(b, '\n')); err != nil {
			j.err = err
		}
	}
}

func (j *jsonlFile) close() error {
	err := j.err
	if ferr := j.buf.Flush(); err == nil {
		err = ferr
	}
	if cerr := j.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// NewWriter creates the history files in dir.
func NewWriter(dir string) (*Writer, error) {
	ops, err := createJSONL(filepath.Join(dir, HistoryFile))
	if err != nil {
		return nil, err
	}
	watches, err := createJSONL(filepath.Join(dir, WatchFile))
	if err != nil {
		return nil, errors.Join(err, ops.close())
	}
	return &Writer{ops: ops, watches: watches}, nil
}

// Operation appends one operation.
func (w *Writer) Operation(op *Operation) {
	w.mu.Lock()
	w.ops.line(AppendOperation(w.ops.scratch, op))
	w.mu.Unlock()
}

// Watch appends one watch response.
func (w *Writer) Watch(r *WatchResponse) {
	w.mu.Lock()
	w.watches.line(AppendWatchResponse(w.watches.scratch, r))
	w.mu.Unlock()
}

// Flush writes buffered records to the files, so that a reader sees everything written so far.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return errors.Join(w.ops.buf.Flush(), w.watches.buf.Flush())
}

// Close flushes and closes both files and returns the first error met while writing.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := errors.Join(w.ops.close(), w.watches.close()); err != nil {
		return fmt.Errorf("write history: %w", err)
	}
	return nil
}

// ReadOperations streams the operations of a history file to fn, in file order.
func ReadOperations(path string, fn func(*Operation) error) error {
	return readJSONL(path, func(dec *json.Decoder) error {
		var op Operation
		if err := dec.Decode(&op); err != nil {
			return err
		}
		return fn(&op)
	})
}

// ReadWatches streams the watch responses of a watch file to fn, in file order.
func ReadWatches(path string, fn func(*WatchResponse) error) error {
	return readJSONL(path, func(dec *json.Decoder) error {
		var r WatchResponse
		if err := dec.Decode(&r); err != nil {
			return err
		}
		return fn(&r)
	})
}

func readJSONL(path string, next func(*json.Decoder) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("open history: %w", err)
	}
	defer f.Close()
	dec := json.NewDecoder(bufio.NewReaderSize(f, 1<<20))
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
