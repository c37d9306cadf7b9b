package report

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/compare"
	"github.com/etcd-chaosbench/chaosbench/results/trend"
)

// A trend's pages lead with its outcome; a regression the gate does not watch is marked informational and
// leaves the outcome a pass, a gated one fails it (its row coloured, its gate cell FAIL).
func TestTrendMarksInformational(t *testing.T) {
	root := t.TempDir()
	var dirs []string
	for i := range 5 {
		d := filepath.Join(root, fmt.Sprintf("night-%d", i))
		os.MkdirAll(d, 0o755)
		p99 := 10 * (1 + 0.02*float64(i%2))
		if i == 4 {
			p99 = 60
		}
		s := &results.Summary{Schema: results.SummarySchema, Name: "put", Outcome: outcome.OK, Start: time.Date(2026, 11, 1+i, 2, 0, 0, 0, time.UTC),
			Operations: map[string]*results.Operation{"put": {Count: 6000, Throughput: 100, Response: results.Latency{P50: 1, P99: p99, P999: 2 * p99}}}}
		if err := results.WriteSummary(d, s); err != nil {
			t.Fatal(err)
		}
		dirs = append(dirs, d)
	}
	for _, tt := range []struct {
		gate     *compare.Gate
		headline string
		says     []string
	}{
		{nil, "# chaosbench trend: **PASS** — outcome ok (exit code 0); regression in put (informational)",
			[]string{"regression: put:p99 +", "(informational)", "| worse | informational |"}},
		{&compare.Gate{Figures: []string{"put:p99"}}, "# chaosbench trend: **FAIL** — outcome threshold-failed (exit code 3); regression in put\n",
			[]string{"- threshold-failed: regression: put put:p99 +", "| **FAIL** |", "put:p99.9 +"}},
	} {
		tr, err := trend.Read(dirs, trend.Options{Gate: tt.gate})
		if err != nil {
			t.Fatal(err)
		}
		var md, page bytes.Buffer
		if err := WriteTrendMarkdown(&md, tr); err != nil {
			t.Fatal(err)
		}
		if err := WriteTrendHTML(&page, tr); err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(md.String(), tt.headline) {
			t.Errorf("gate %v: trend.md starts %q, want %q", tt.gate, strings.SplitN(md.String(), "\n", 2)[0], tt.headline)
		}
		for _, s := range tt.says {
			if !strings.Contains(md.String(), s) {
				t.Errorf("gate %v: trend.md does not say %q:\n%s", tt.gate, s, md.String())
			}
		}
		o := tr.Verdict()
		if !strings.Contains(page.String(), "<title>chaosbench trend: "+o.Headline()+":") {
			t.Errorf("gate %v: the page's title is not the outcome's (%s)", tt.gate, o.Headline())
		}
	}
}
