package chaosbench

import (
	"strings"
	"testing"

	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// Thresholds come from scenario files as lists; thresholds given as flags replace the file's; a bad one is
// a usage error before anything starts.
func TestScenarioThresholds(t *testing.T) {
	s, err := loadScenario(t, "threshold:\n  - etcd-hardware\n  - put:p99<25ms\nscrape-interval: 500ms\n")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(s.Thresholds, ",") != "etcd-hardware,put:p99<25ms" || s.ScrapeInterval.String() != "500ms" {
		t.Fatalf("thresholds %q, scrape interval %s", s.Thresholds, s.ScrapeInterval)
	}
	if err := s.validate(); err != nil {
		t.Fatal(err)
	}
	s, err = loadScenario(t, "threshold: [put:p99<25ms]\n", "--threshold", "errors<1%")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(s.Thresholds, ",") != "errors<1%" {
		t.Fatalf("the command line did not win: %q", s.Thresholds)
	}
	s.Thresholds = []string{"put:p99<25"}
	if err := s.validate(); !outcome.IsUsage(err) || !strings.Contains(err.Error(), "needs a unit") {
		t.Fatalf("bad threshold: %v", err)
	}
}
