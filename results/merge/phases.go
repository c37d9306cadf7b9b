package merge

import (
	"fmt"
	"path/filepath"
	"sort"
	"time"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// Phases files every worker's measured records (their record logs, results.RecordsFile) under the phases
// of the base run's fault windows, on the merged timeline, and summarises them over the merged measured
// load: the phase tables of the merged run, as one generator sending the whole load would have measured
// them. It returns false, with the reason, when a worker logged no records (a worker of an older
// chaosbench, or one whose load was never measured): the caller keeps the base run's tables then.
func Phases(ws []Worker, faults []results.FaultWindow) (map[string]*results.Phase, string, error) {
	from, end := int64(-1), int64(0)
	for _, w := range ws {
		sp := w.Summary.Split
		if !sp.Records || sp.LoadEndNs <= sp.MeasuredFromNs {
			return nil, fmt.Sprintf("worker %d logged no measured records", sp.Worker), nil
		}
		if f := sp.MeasuredFromNs + w.ShiftNs; from < 0 || f < from {
			from = f
		}
		end = max(end, sp.LoadEndNs+w.ShiftNs)
	}
	p, err := results.NewPhases(results.CollectorOptions{})
	if err != nil {
		return nil, "", err
	}
	p.Begin(time.Duration(from))
	replayWindows(p, faults)
	for _, w := range ws {
		shift := time.Duration(w.ShiftNs)
		worker := w.Summary.Split.Worker
		err := results.ReadRecordLog(filepath.Join(w.Dir, results.RecordsFile), func(r *results.Record) error {
			r.Intended += shift
			r.Start += shift
			r.End += shift
			p.Record(worker, r)
			return nil
		})
		if err != nil {
			return nil, "", fmt.Errorf("merge: worker %d: %w", worker, err)
		}
	}
	if err := p.Close(time.Duration(end)); err != nil {
		return nil, "", fmt.Errorf("merge: phases: %w", err)
	}
	return p.Summary(time.Duration(from), time.Duration(end)), "", nil
}

// replayWindows opens, heals and closes the windows' phases in the order they happened, before any record
// is filed: a record's phase is the one in force at its intended start, whenever it is filed. The windows'
// availability is measured elsewhere (Availability); here they only mark the phases.
func replayWindows(p *results.Phases, faults []results.FaultWindow) {
	type event struct {
		at   int64
		kind int // 0 open, 1 heal, 2 close: at the same instant, in this order
		i    int
	}
	var evs []event
	for i, f := range faults {
		if f.StartNs <= 0 {
			continue // never injected
		}
		evs = append(evs, event{f.StartNs, 0, i})
		if f.EndNs > 0 {
			evs = append(evs, event{f.EndNs, 1, i})
		}
		obs := f.EndNs
		if f.Availability != nil && f.Availability.ObservedToNs > 0 {
			obs = f.Availability.ObservedToNs
		}
		if obs > 0 {
			evs = append(evs, event{obs, 2, i})
		}
	}
	sort.SliceStable(evs, func(a, b int) bool {
		if evs[a].at != evs[b].at {
			return evs[a].at < evs[b].at
		}
		return evs[a].kind < evs[b].kind
	})
	open := map[int]*results.Window{}
	for _, e := range evs {
		at := time.Duration(e.at)
		switch e.kind {
		case 0:
			open[e.i] = p.Open(at)
		case 1:
			open[e.i].Heal(at)
		case 2:
			open[e.i].Finalize(at)
		}
	}
}
