package chaosbench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/etcd-chaosbench/chaosbench/outcome"
	"github.com/etcd-chaosbench/chaosbench/results"
	"github.com/etcd-chaosbench/chaosbench/results/history"
)

// TestCheckKnownIssue drives `chaosbench check DIR` on a real recorded history with a request etcd applied
// twice (linearizability/testdata/observed/txn-applied-twice, op 4299), given the attempts that prove
// etcd-io/etcd#18424 (sent twice, the first send ended in DeadlineExceeded), beside the summary of another
// run that said ok: the re-check attributes the duplicate by its evidence, writes the finding into
// summary.json and decides with the run's own policy: known issue (exit 0) under report, a violation
// (exit 4) under fail; without a summary, from the checks and their findings alone.
func TestCheckKnownIssue(t *testing.T) {
	for _, tt := range []struct {
		name      string
		policy    outcome.KnownIssuePolicy
		noSummary bool
		want      outcome.Kind
	}{
		{"report", outcome.KnownIssuesReport, false, outcome.KnownIssue},
		{"fail", outcome.KnownIssuesFail, false, outcome.Violation},
		{"no summary", "", true, outcome.KnownIssue},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := duplicateWithAttempts(t)
			if !tt.noSummary {
				s, err := results.ReadSummary(filepath.Join(outcomesDir, "check-violation"))
				if err != nil {
					t.Fatal(err)
				}
				s.KnownIssuePolicy = string(tt.policy)
				if err := results.WriteSummary(dir, s); err != nil {
					t.Fatal(err)
				}
			}
			var out bytes.Buffer
			_, err := Check(context.Background(), CheckOptions{Dir: dir, Out: &out})
			agrees(t, tt.want, err, out.String(), "", "", "")
			if !strings.Contains(out.String(), "KNOWN ISSUE") || !strings.Contains(out.String(), "etcd-io/etcd#18424") {
				t.Errorf("the verdict lines do not name the known issue:\n%s", out.String())
			}
			if tt.noSummary {
				return
			}
			s, err := results.ReadSummary(dir)
			if err != nil || s.Outcome != tt.want || len(s.KnownIssues) != 1 || !strings.Contains(s.KnownIssues[0].Evidence, "failed DeadlineExceeded") {
				t.Fatalf("summary.json afterwards: %v %+v (%v), want %s with the finding and its evidence", s.Outcome, s.KnownIssues, err, tt.want)
			}
		})
	}
}

// duplicateWithAttempts writes the observed history of a request applied twice into a new directory, its
// op 4299 given the two attempts etcd-io/etcd#18424 needs and every operation marked as recorded with its
// attempts, as the recording client writes them.
func duplicateWithAttempts(t *testing.T) string {
	t.Helper()
	src := filepath.Join("linearizability", "testdata", "observed", "txn-applied-twice")
	dir := t.TempDir()
	w, err := history.NewWriter(dir)
	if err != nil {
		t.Fatal(err)
	}
	i := 0
	err = history.ReadOperations(filepath.Join(src, history.HistoryFile), func(op *history.Operation) error {
		op.AttemptsRecorded = true
		if i == 4299 {
			op.Attempts = []history.Attempt{
				{Start: op.Call, End: op.Return - 50e6, Code: "DeadlineExceeded", Error: "context deadline exceeded", Peer: "127.0.0.1:40003"},
				{Start: op.Return - 45e6, End: op.Return - 1e6, Peer: "127.0.0.1:40002"},
			}
		}
		w.Operation(op)
		i++
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{history.WatchFile, results.FaultsFile} {
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
