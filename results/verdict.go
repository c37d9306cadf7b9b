package results

// Threshold verdicts. NotApplicable is for thresholds that had nothing to judge in this run (a glob that
// matched no operation of a named set that did match); it neither passes nor fails the run, and it is
// shown as such.
const (
	ThresholdPass          = "pass"
	ThresholdFail          = "fail"
	ThresholdNotApplicable = "n/a"
)

// ThresholdResult is the verdict of one threshold (summary.json "thresholds").
type ThresholdResult struct {
	// Expr is the threshold as written, e.g. "put:p99<25ms".
	Expr string `json:"expr"`
	// Set names the named set the threshold came from ("k8s-slo", "etcd-hardware").
	Set string `json:"set,omitempty"`
	// Default marks a default threshold (DefaultThresholds): judged because no threshold given overrode it.
	Default bool   `json:"default,omitempty"`
	Verdict string `json:"verdict"`
	// Observed is the value compared, formatted in the threshold's unit ("38.2ms", "0.02%", "950 ops/s");
	// Value is the same number in the unit named by Unit (ms, %, ops/s, count).
	Observed string  `json:"observed"`
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
	// Subject is what the observed value belongs to: the worst operation or member.
	Subject string `json:"subject,omitempty"`
	// Detail explains a failure or a missing value.
	Detail string `json:"detail,omitempty"`
}

// Origin says where a threshold came from, for a report's "set" column: its named set, "default" for a
// default threshold, "" for one given as written.
func (t ThresholdResult) Origin() string {
	if t.Default {
		return "default"
	}
	return t.Set
}

// Severities of a Finding, most severe first.
const (
	SeverityProblem = "problem"
	SeverityWarning = "warning"
	SeverityOK      = "ok"
)

// Finding is one sentence of the diagnosis (summary.json "diagnosis"): what the evidence says about why a
// run was slow or unavailable, or that a suspect was cleared.
type Finding struct {
	Severity string `json:"severity"`
	// Topic groups findings: disk, leader, network, cpu, generator, errors, availability, watch, quota,
	// load, run.
	Topic   string `json:"topic"`
	Message string `json:"message"`
}
