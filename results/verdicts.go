package results

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// FaultsFile holds one FaultWindow per line, in injection order.
const FaultsFile = "faults.jsonl"

// FaultWindow is one fault as it ran: what, on which members, when, and how it ended. StartNs and EndNs
// are offsets from the run's time base, the same base as the request history (history.bin) and the
// records, so that windows can be laid over latencies and histories without clock conversion.
type FaultWindow struct {
	Fault   string    `json:"fault"`
	Spec    string    `json:"spec,omitempty"`
	Targets []string  `json:"targets,omitempty"`
	Leader  string    `json:"leader,omitempty"` // the leader when the fault was injected
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	StartNs int64     `json:"start_ns"`
	EndNs   int64     `json:"end_ns"`
	// Outcome is "recovered", or says what went wrong ("not recovered within 30s: ...").
	Outcome string `json:"outcome"`
	// RecoveredNs is when the cluster was healthy again after the heal (0 if it was not).
	RecoveredNs int64 `json:"recovered_ns,omitempty"`
	// Availability is what the window did to clients: write gap, election, errors (see Availability).
	Availability *Availability `json:"availability,omitempty"`
	// Members is whether the members held the same data once the cluster recovered (the members-agree
	// check, compared with the load still running); nil when it was not compared.
	Members *Check `json:"members,omitempty"`
	// Effect is what the fault was seen to do, for the faults whose members can tell (failpoints, a
	// partition held until a snapshot); nil for the others.
	Effect *Effect `json:"effect,omitempty"`
}

// Effect is what a fault did, as the members themselves report it: a failpoint's gofail counts, the
// leader's snapshot metrics. It is the evidence that a fault which acts only when a member reaches a
// point of its code did act.
type Effect struct {
	// Detail says it in one line: "m2 panicked at raftAfterSave", "beforeCommit fired 14 times on m1".
	Detail string `json:"detail"`
	// Hits counts, per target, how often an armed failpoint ran its action (gofail's count: a
	// count-limited 2*sleep(D) fires at most twice however often it is reached; a member that panicked
	// there fired once).
	Hits map[string]int `json:"hits,omitempty"`
	// Panicked lists the targets a failpoint crashed; each was started again on its own data.
	Panicked []string `json:"panicked,omitempty"`
	// SnapshotsSent is how many snapshots the leader sent after a partition held until one was healed
	// (etcd_network_snapshot_send_success).
	SnapshotsSent int `json:"snapshots_sent,omitempty"`
}

// ReadFaults reads dir/faults.jsonl; a run without faults has none and returns nil.
func ReadFaults(dir string) ([]FaultWindow, error) {
	f, err := os.Open(filepath.Join(dir, FaultsFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read faults: %w", err)
	}
	defer f.Close()
	var out []FaultWindow
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var w FaultWindow
		if err := json.Unmarshal(sc.Bytes(), &w); err != nil {
			return nil, fmt.Errorf("read faults: %s: %w", FaultsFile, err)
		}
		out = append(out, w)
	}
	return out, sc.Err()
}

// Verdicts of a check. Unknown (the check could not decide, for example it timed out) is never a pass.
// Nothing (the history held nothing this check looks at, such as no watch events) is neither a pass nor a
// failure: it says the check did not check anything.
const (
	VerdictOK        = "ok"
	VerdictViolation = "violation"
	VerdictUnknown   = "unknown"
	VerdictNothing   = "nothing to check"
	// VerdictKnownIssue: every violation the check found is attributed, by recorded evidence, to a known
	// upstream issue (Summary.KnownIssues says which and why).
	VerdictKnownIssue = "known issue"
)

// KnownIssueFinding is a finding attributed to an entry of the known-issue catalog because the evidence the
// run recorded proves it (summary.json "known_issues").
type KnownIssueFinding struct {
	// Issue names the upstream issue ("etcd-io/etcd#18424"); Title says what it is.
	Issue string `json:"issue"`
	Title string `json:"title"`
	// Check is the check that found it; Finding what it found ("request applied twice: key ... at revision ...").
	Check   string `json:"check"`
	Finding string `json:"finding"`
	// Evidence is what proves the attribution ("2 attempts on the wire: the first failed with Unavailable ...").
	Evidence string `json:"evidence"`
	// Count is how many findings of the check this entry explains.
	Count int `json:"count,omitempty"`
}

// Text is the finding in one line.
func (k KnownIssueFinding) Text() string {
	s := "known issue " + k.Issue
	if k.Title != "" {
		s += " (" + k.Title + ")"
	}
	if k.Count > 1 {
		s += fmt.Sprintf(", %d findings", k.Count)
	}
	s += ": " + oneLine(k.Finding)
	if k.Evidence != "" {
		s += "; evidence: " + oneLine(k.Evidence)
	}
	return s
}

// Check is the verdict of one consistency check of a run (linearizability, watch guarantees, serializable
// reads, ...).
type Check struct {
	Name    string `json:"name"`
	Verdict string `json:"verdict"`
	// Detail says what was checked, or names the smallest failing key and operations.
	Detail string `json:"detail,omitempty"`
	// Seconds is how long the check took.
	Seconds float64 `json:"seconds"`
}
