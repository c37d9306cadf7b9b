package history

// History is a recorded run, loaded for checking: every operation and every watch record, in file order.
// A loaded history is read-only: to keep a long run's history in memory, large range answers hold their
// key-values packed (see RangeResponse) and records that carry the same previous key-value share it.
type History struct {
	Operations []Operation
	Watches    []WatchResponse
}

// Load reads the history files of run directory dir (binary, or a legacy run's JSON lines). A run
// without watches has no watch file. The two files are decoded concurrently, each straight into its slice;
// the key-values of large range answers are held packed (see RangeResponse).
func Load(dir string) (*History, error) {
	opsPath, err := HistoryPath(dir)
	if err != nil {
		return nil, err
	}
	h := &History{}
	watchErr := make(chan error, 1)
	go func() {
		path, err := WatchPath(dir)
		if err != nil {
			watchErr <- nil // a run without watches
			return
		}
		n, err := countRecords(path)
		if err != nil {
			watchErr <- err
			return
		}
		h.Watches = make([]WatchResponse, 0, n)
		watchErr <- readWatches(path, &kvTable{}, func() *WatchResponse {
			h.Watches = append(h.Watches, WatchResponse{})
			return &h.Watches[len(h.Watches)-1]
		}, func(*WatchResponse) error { return nil })
	}()
	h.Operations, err = loadOperations(opsPath)
	if werr := <-watchErr; err == nil {
		err = werr
	}
	if err != nil {
		return nil, err
	}
	return h, nil
}

// LoadOperations reads the operations of run directory dir, as Load does, without its watch records: a
// check that streams the watch file (linearizability.CheckDir) reads it again pass by pass instead of
// holding it.
func LoadOperations(dir string) (*History, error) {
	opsPath, err := HistoryPath(dir)
	if err != nil {
		return nil, err
	}
	ops, err := loadOperations(opsPath)
	if err != nil {
		return nil, err
	}
	return &History{Operations: ops}, nil
}

// loadOperations decodes a history file straight into one slice, large range answers packed.
func loadOperations(path string) ([]Operation, error) {
	n, err := countRecords(path)
	if err != nil {
		return nil, err
	}
	ops := make([]Operation, 0, n)
	err = readOperations(path, &kvTable{}, false, func() *Operation {
		ops = append(ops, Operation{})
		return &ops[len(ops)-1]
	}, func(*Operation) error { return nil })
	return ops, err
}
