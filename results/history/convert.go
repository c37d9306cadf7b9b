package history

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
)

// ConvertDir writes the binary history files of run directory dir from its legacy JSON-lines files
// (history.jsonl, and watch.jsonl when there is one), leaving those in place. The checker reads either;
// converting makes an old run's history a fraction of its size and fast to check again.
func ConvertDir(dir string) error {
	opsPath, err := existing(dir, LegacyHistoryFile)
	if err != nil {
		return err
	}
	w, err := NewWriter(dir)
	if err != nil {
		return err
	}
	err = ReadOperations(opsPath, func(op *Operation) error { w.Operation(op); return nil })
	if err == nil {
		if watchPath, werr := existing(dir, LegacyWatchFile); werr == nil {
			err = ReadWatches(watchPath, func(r *WatchResponse) error { w.Watch(r); return nil })
		} else if !errors.Is(werr, fs.ErrNotExist) {
			err = werr
		}
	}
	if err = errors.Join(err, w.Close()); err != nil {
		return fmt.Errorf("convert %s: %w", dir, err)
	}
	return nil
}

// Dump writes the records of a history file (binary or legacy), operations or watch records, to out as
// JSON lines: one object per record, with the fields and names the legacy files had.
func Dump(path string, watches bool, out io.Writer) error {
	enc := json.NewEncoder(out)
	if watches {
		return ReadWatches(path, func(r *WatchResponse) error { return enc.Encode(r) })
	}
	return ReadOperations(path, func(op *Operation) error { return enc.Encode(op) })
}
