package faults

import (
	"os"
	"testing"

	"github.com/etcd-chaosbench/chaosbench/clusters"
)

// TestMain lets a test binary start as an etcd member process. The tests that judge behaviour (a fault's
// outcome, exact operation counts of an open-loop plan, answers) and no latency call t.Parallel: make test
// runs them three at a time (-parallel 3) once this package's sequential tests, which judge latency or hold
// timing bounds (a delay, a slow disk, a pause, a kill's restart time, an election), have run alone.
func TestMain(m *testing.M) {
	clusters.RunMemberIfRequested()
	os.Exit(m.Run())
}
