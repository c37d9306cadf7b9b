package main

import (
	"github.com/spf13/pflag"

	"github.com/etcd-chaosbench/chaosbench"
	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// replayInto replaces *s with the scenario run directory dir recorded, with the flags given on the
// command line over it.
func replayInto(s *chaosbench.Scenario, dir, config string, given *pflag.FlagSet) error {
	if config != "" {
		return outcome.Usagef("--replay and --config: give one (a run directory already holds its settings)")
	}
	rs, err := chaosbench.ReplayScenario(dir, given)
	if err != nil {
		return err
	}
	*s = rs
	return nil
}
