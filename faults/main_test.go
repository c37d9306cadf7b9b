package faults

import (
	"os"
	"testing"

	"github.com/etcd-chaosbench/chaosbench/clusters"
)

func TestMain(m *testing.M) {
	clusters.RunMemberIfRequested()
	os.Exit(m.Run())
}
