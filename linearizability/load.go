package linearizability

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
)

// History is a recorded run, loaded for checking: every operation and every watch record, in file order.
type History struct {
	Operations []Operation
	Watches    []WatchResponse
}

// LoadHistory reads the history files of run directory dir. A run without watches has no watch file.
func LoadHistory(dir string) (*History, error) {
	ops, err := decodeJSONL(filepath.Join(dir, HistoryFile), (*decoder).operation)
	if err != nil {
		return nil, err
	}
	watches, err := decodeJSONL(filepath.Join(dir, WatchFile), (*decoder).watchResponse)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, err
	}
	return &History{Operations: ops, Watches: watches}, nil
}

// decodeJSONL decodes a JSON-lines file of T with decode. Histories of long runs are hundreds of
// megabytes, so the file is cut into blocks at line boundaries and the blocks are decoded in parallel;
// records keep their file order.
func decodeJSONL[T any](path string, decode func(*decoder, *T) error) ([]T, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("open history: %w", err)
	}
	defer f.Close()

	const blockSize = 4 << 20
	type block struct {
		data []byte
		out  []T
		err  error
		last bool
	}
	var blocks []*block
	var mu sync.Mutex
	work := make(chan *block)
	var wg sync.WaitGroup
	for range max(runtime.GOMAXPROCS(0), 1) {
		wg.Go(func() {
			keys := map[string]string{}
			for b := range work {
				b.out, b.err = decodeBlock(b.data, b.last, keys, decode)
				b.data = nil
			}
		})
	}
	var readErr error
	carry := []byte(nil)
	for {
		buf := make([]byte, len(carry), len(carry)+blockSize)
		copy(buf, carry)
		n, err := io.ReadFull(f, buf[len(carry):cap(buf)])
		buf = buf[:len(carry)+n]
		eof := err == io.EOF || err == io.ErrUnexpectedEOF
		if err != nil && !eof {
			readErr = fmt.Errorf("read %s: %w", filepath.Base(path), err)
			break
		}
		cut := len(buf)
		if !eof {
			cut = bytes.LastIndexByte(buf, '\n') + 1
			if cut == 0 {
				// A single line longer than the block: keep reading until it ends.
				carry = buf
				continue
			}
		}
		carry = append([]byte(nil), buf[cut:]...)
		b := &block{data: buf[:cut], last: eof}
		mu.Lock()
		blocks = append(blocks, b)
		mu.Unlock()
		work <- b
		if eof {
			break
		}
	}
	close(work)
	wg.Wait()
	if readErr != nil {
		return nil, readErr
	}
	total := 0
	for _, b := range blocks {
		if b.err != nil {
			return nil, fmt.Errorf("read %s: %w", filepath.Base(path), b.err)
		}
		total += len(b.out)
	}
	out := make([]T, 0, total)
	for _, b := range blocks {
		out = append(out, b.out...)
		b.out = nil // let the collector take each block as soon as it is copied
	}
	return out, nil
}

// decodeBlock decodes the records of one block, one per line. In the file's last block a torn last line
// (a run killed mid-write) ends the history: everything before it is valid.
func decodeBlock[T any](data []byte, last bool, keys map[string]string, decode func(*decoder, *T) error) ([]T, error) {
	out := make([]T, 0, bytes.Count(data, []byte{'\n'})+1)
	d := &decoder{keys: keys}
	line := 0
	for len(data) > 0 {
		line++
		n := bytes.IndexByte(data, '\n')
		rest := []byte(nil)
		if n >= 0 {
			data, rest = data[:n], data[n+1:]
		}
		if len(bytes.TrimSpace(data)) > 0 {
			var v T
			d.b, d.i = data, 0
			err := decode(d, &v)
			if err == nil && d.peek() != 0 {
				err = d.fail("trailing data")
			}
			if err != nil {
				if last && n < 0 {
					break // a torn last line
				}
				return nil, fmt.Errorf("record %d of a block: %w", line, err)
			}
			out = append(out, v)
		}
		data = rest
	}
	return out, nil
}
