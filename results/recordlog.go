package results

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"time"
)

// RecordsFile is the record log of one worker of a split load: every measured record, so that the merge can
// file all the workers' requests under the phases of the fault windows only worker 0 (or the observer) saw.
const RecordsFile = "records.bin"

// The record log format (version 1): a header (magic, version), then one record after another:
//
//	uvarint  op: its number among the log's names plus one, or 0 then uvarint length and the name
//	varint   intended, as a delta from the previous record's (records arrive from many goroutines)
//	varint   start - intended
//	varint   end - start
//	byte     outcome | miss<<2 | access<<4
//	uvarint  error class, like op (errors only)
//
// About 8 bytes a record. A record cut short at the end of the file (a run killed while writing) ends the
// log; everything before it is valid.
const (
	recordLogMagic   = "CBRECS"
	recordLogVersion = 1
)

// RecordLog is a Sink that writes the measured records (those intended after the warm-up, as the Collector
// counts them) to a file. It is the raw material of a merged run's phase tables: ReadRecordLog gives the
// records back. Record serialises on a mutex and encodes into a buffer that is written out every 64 KB
// (about eight thousand records); it is on the request path of split loads only.
type RecordLog struct {
	warmup time.Duration

	mu          sync.Mutex
	measureFrom time.Duration
	begun       bool
	f           *os.File
	w           *bufio.Writer
	names       map[string]uint64
	prev        time.Duration
	buf         []byte
	err         error
}

// NewRecordLog creates the record log at path. Records intended before the load's Begin plus warmup are
// not logged.
func NewRecordLog(path string, warmup time.Duration) (*RecordLog, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("record log: %w", err)
	}
	l := &RecordLog{warmup: warmup, f: f, w: bufio.NewWriterSize(f, 64<<10), names: map[string]uint64{}}
	l.w.WriteString(recordLogMagic)
	l.w.WriteByte(recordLogVersion)
	return l, nil
}

// Begin marks the start of the load: the warm-up counts from here.
func (l *RecordLog) Begin(at time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.begun {
		l.begun, l.measureFrom = true, at+l.warmup
	}
}

// Record logs r if it was intended after the warm-up.
func (l *RecordLog) Record(_ int, r *Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.begun || r.Intended < l.measureFrom || l.err != nil {
		return
	}
	b := l.name(l.buf[:0], r.Op)
	b = binary.AppendVarint(b, int64(r.Intended-l.prev))
	b = binary.AppendVarint(b, int64(r.Start-r.Intended))
	b = binary.AppendVarint(b, int64(r.End-r.Start))
	b = append(b, byte(r.Outcome)|byte(r.Miss)<<2|byte(r.Access)<<4)
	if r.Outcome == Error {
		b = l.name(b, r.ErrClass)
	}
	l.prev, l.buf = r.Intended, b
	if _, err := l.w.Write(b); err != nil {
		l.err = fmt.Errorf("record log: %w", err)
	}
}

// name appends s as the format writes names: its number plus one once it has been written.
func (l *RecordLog) name(b []byte, s string) []byte {
	if n, ok := l.names[s]; ok {
		return binary.AppendUvarint(b, n+1)
	}
	l.names[s] = uint64(len(l.names))
	b = binary.AppendUvarint(b, 0)
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// Close writes what is buffered and closes the file. Records that arrive later are dropped.
func (l *RecordLog) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return l.err
	}
	err := errors.Join(l.err, l.w.Flush(), l.f.Close())
	l.f, l.err = nil, errors.New("record log: closed")
	if err != nil {
		return fmt.Errorf("record log: %w", err)
	}
	return nil
}

// ReadRecordLog calls fn with every record of the log at path, in the order they were logged; fn must not
// keep r. A record cut short at the end of the file ends the log without an error.
func ReadRecordLog(path string, fn func(r *Record) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("record log: %w", err)
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 64<<10)
	head := make([]byte, len(recordLogMagic)+1)
	if _, err := io.ReadFull(br, head); err != nil || string(head[:len(recordLogMagic)]) != recordLogMagic {
		return fmt.Errorf("record log %s: not a record log", path)
	}
	if head[len(recordLogMagic)] != recordLogVersion {
		return fmt.Errorf("record log %s: version %d, this chaosbench reads %d", path, head[len(recordLogMagic)], recordLogVersion)
	}
	d := recordDecoder{r: br}
	var r Record
	for {
		ok, err := d.next(&r)
		if err != nil {
			return fmt.Errorf("record log %s: %w", path, err)
		}
		if !ok {
			return nil
		}
		if err := fn(&r); err != nil {
			return err
		}
	}
}

// recordDecoder reads the records of a log after its header.
type recordDecoder struct {
	r     *bufio.Reader
	names []string
	prev  time.Duration
}

// next decodes one record into r; false at the end of the log, or at a record cut short.
func (d *recordDecoder) next(r *Record) (bool, error) {
	op, err := d.name()
	if err != nil {
		return d.cut(err)
	}
	var v [3]int64
	for i := range v {
		if v[i], err = binary.ReadVarint(d.r); err != nil {
			return d.cut(err)
		}
	}
	flags, err := d.r.ReadByte()
	if err != nil {
		return d.cut(err)
	}
	*r = Record{Op: op, Outcome: Outcome(flags & 3), Miss: Miss(flags >> 2 & 3), Access: Access(flags >> 4 & 3)}
	r.Intended = d.prev + time.Duration(v[0])
	r.Start = r.Intended + time.Duration(v[1])
	r.End = r.Start + time.Duration(v[2])
	d.prev = r.Intended
	if r.Outcome == Error {
		if r.ErrClass, err = d.name(); err != nil {
			return d.cut(err)
		}
	}
	return true, nil
}

// cut tells a record cut short at the end of the file (the end of the log) from a corrupt one.
func (d *recordDecoder) cut(err error) (bool, error) {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return false, nil
	}
	return false, err
}

func (d *recordDecoder) name() (string, error) {
	n, err := binary.ReadUvarint(d.r)
	if err != nil {
		return "", err
	}
	if n > 0 {
		if n > uint64(len(d.names)) {
			return "", fmt.Errorf("name %d of %d: corrupt", n, len(d.names))
		}
		return d.names[n-1], nil
	}
	size, err := binary.ReadUvarint(d.r)
	if err != nil {
		return "", io.ErrUnexpectedEOF
	}
	if size > 1<<16 {
		return "", fmt.Errorf("name of %d bytes: corrupt", size)
	}
	b := make([]byte, size)
	if _, err := io.ReadFull(d.r, b); err != nil {
		return "", io.ErrUnexpectedEOF
	}
	d.names = append(d.names, string(b))
	return d.names[len(d.names)-1], nil
}
