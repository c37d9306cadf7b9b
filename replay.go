package chaosbench

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/pflag"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
)

// notReplayed are the flags of `chaosbench run` that are not settings of the scenario a run recorded.
var notReplayed = map[string]bool{"replay": true, "config": true, "cpu-profile": true}

// ReplayScenario returns the scenario the run directory dir recorded (summary.json's config, with its
// seed), to run again exactly as it ran: the same cluster, versions, workload, fault schedule and seed,
// so the same request plan and fault choices. Out is cleared (the replay writes a new directory). Flags
// changed in given (the command line of the replay) override the recording, as they override a file.
func ReplayScenario(dir string, given *pflag.FlagSet) (Scenario, error) {
	s := DefaultScenario()
	if _, err := os.Stat(filepath.Join(dir, results.SummaryFile)); err != nil {
		return s, outcome.Usagef("--replay %s: not a run directory (no %s)", dir, results.SummaryFile)
	}
	sum, err := results.ReadSummary(dir)
	if err != nil {
		return s, outcome.Usagef("--replay %s: %v", dir, err)
	}
	if len(sum.Config) == 0 {
		return s, outcome.Usagef("--replay %s: the run recorded no settings (summary.json has no config)", dir)
	}
	if err := json.Unmarshal(sum.Config, &s); err != nil {
		return s, outcome.Usagef("--replay %s: summary.json config: %v", dir, err)
	}
	if s.Seed == 0 {
		s.Seed = sum.Seed
	}
	s.Out = ""
	if given == nil {
		return s, nil
	}
	fs := pflag.NewFlagSet("replay", pflag.ContinueOnError)
	BindFlags(fs, &s)
	var errs []error
	given.Visit(func(f *pflag.Flag) {
		to := fs.Lookup(f.Name)
		if notReplayed[f.Name] || to == nil {
			return
		}
		var err error
		if from, ok := f.Value.(pflag.SliceValue); ok {
			err = to.Value.(pflag.SliceValue).Replace(from.GetSlice())
		} else {
			err = to.Value.Set(f.Value.String())
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("--%s: %w", f.Name, err))
		}
	})
	if err := errors.Join(errs...); err != nil {
		return s, outcome.Usagef("--replay: %v", err)
	}
	return s, nil
}
