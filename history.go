package chaosbench

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// HistoryDumpOptions are the settings of `chaosbench history dump`.
type HistoryDumpOptions struct {
	// Path is a run directory or one history file (binary, or a legacy run's JSON lines).
	Path string
	// Watches dumps a run directory's watch records instead of its operations.
	Watches bool
	// Out receives the JSON lines.
	Out io.Writer
}

// HistoryDump prints a recorded history as JSON lines, one object per operation (or watch record), with
// the fields the legacy history.jsonl had: for people, jq and tools written for the old files.
func HistoryDump(o HistoryDumpOptions) error {
	path, watches, err := historyFile(o.Path, o.Watches)
	if err != nil {
		return err
	}
	out := bufio.NewWriterSize(o.Out, 1<<20)
	err = history.Dump(path, watches, out)
	if ferr := out.Flush(); err == nil {
		err = ferr
	}
	if err != nil {
		return fmt.Errorf("dump %s: %w", path, err)
	}
	return nil
}

// historyFile resolves what to dump: a file as it is (a watch file by its name), a run directory's
// operations or watch records.
func historyFile(path string, watches bool) (string, bool, error) {
	st, err := os.Stat(path)
	if err != nil {
		return "", false, outcome.Usagef("%s: %v", path, errors.Unwrap(err))
	}
	if !st.IsDir() {
		base := filepath.Base(path)
		return path, watches || base == history.WatchFile || base == history.LegacyWatchFile, nil
	}
	find := history.HistoryPath
	if watches {
		find = history.WatchPath
	}
	file, err := find(path)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, outcome.Usagef("%s: not a run directory with a recorded history", path)
	}
	return file, watches, err
}

// HistoryConvert writes the binary history files of a run directory recorded before the binary format
// from its JSON lines (which stay), and prints what it did.
func HistoryConvert(dir string, out io.Writer) error {
	if _, err := os.Stat(filepath.Join(dir, history.LegacyHistoryFile)); err != nil {
		return outcome.Usagef("%s: no %s to convert", dir, history.LegacyHistoryFile)
	}
	if err := history.ConvertDir(dir); err != nil {
		return err
	}
	for _, pair := range [][2]string{{history.LegacyHistoryFile, history.HistoryFile}, {history.LegacyWatchFile, history.WatchFile}} {
		from, err1 := os.Stat(filepath.Join(dir, pair[0]))
		to, err2 := os.Stat(filepath.Join(dir, pair[1]))
		if err1 == nil && err2 == nil {
			fmt.Fprintf(out, "%s: %d bytes -> %s: %d bytes\n", pair[0], from.Size(), pair[1], to.Size())
		}
	}
	fmt.Fprintf(out, "the JSON lines files are kept; chaosbench reads %s when both are there\n", history.HistoryFile)
	return nil
}
