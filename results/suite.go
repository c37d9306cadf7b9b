package results

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/etcd-chaosbench/chaosbench/outcome"
)

// SuiteFile is the name of a suite's summary inside its directory; SuiteSchema versions its layout
// (results/SCHEMA.md documents it).
const (
	SuiteFile   = "suite.json"
	SuiteSchema = "chaosbench.suite/v1"
)

// Suite is the machine-readable result of `chaosbench suite` (suite.json): which scenarios were selected,
// and each one's verdict, seed, run directories and replay command.
type Suite struct {
	Schema string `json:"schema"`
	// Outcome and Reasons are the suite's verdict, decided from its scenarios' outcomes (DecideSuite).
	Outcome outcome.Kind     `json:"outcome"`
	Reasons []outcome.Reason `json:"reasons,omitempty"`
	Command []string         `json:"command,omitempty"`
	// Chaosbench is chaosbench's version.
	Chaosbench      string          `json:"chaosbench"`
	Selection       SuiteSelection  `json:"selection"`
	Start           time.Time       `json:"start"`
	End             time.Time       `json:"end"`
	DurationSeconds float64         `json:"duration_s"`
	Scenarios       []SuiteScenario `json:"scenarios"`
}

// SuiteSelection is how the scenarios were chosen and what was set for all of them.
type SuiteSelection struct {
	Paths []string `json:"paths"`
	// Registry is how many scenarios the paths hold; the suite ran those its filters selected.
	Registry int      `json:"registry"`
	Tags     []string `json:"tags,omitempty"`
	Only     []string `json:"only,omitempty"`
	Shard    string   `json:"shard,omitempty"`
	// Seed is the seed given for every scenario (0: each scenario's seed policy chose).
	Seed         int64    `json:"seed,omitempty"`
	Set          []string `json:"set,omitempty"`
	RetryHarness bool     `json:"retry_harness,omitempty"`
	// Release is "affected" or "fixed" when the suite ran its regression scenarios on that release of
	// each one's bug.
	Release string `json:"release,omitempty"`
}

// SuiteScenario is one scenario of a suite and its verdict: the outcome of its last attempt.
type SuiteScenario struct {
	Name       string   `json:"name"`
	File       string   `json:"file"`
	Tags       []string `json:"tags,omitempty"`
	SeedPolicy string   `json:"seed_policy"`
	Seed       int64    `json:"seed"`
	// Issue is the upstream issue a regression scenario reproduces; EtcdVersion the release it ran on.
	Issue       string `json:"issue,omitempty"`
	EtcdVersion string `json:"etcd_version,omitempty"`
	// Expect is set when the scenario ran on the release that had its bug: the outcome kinds that catch
	// it. Outcome and Reasons are then the judge's verdict of a run expected to find something
	// (outcome.Expect); the attempts keep the runs' own outcomes.
	Expect []outcome.Kind `json:"expect,omitempty"`
	// Outcome and Reasons are the last attempt's; Dir is its run directory, relative to the suite's.
	Outcome outcome.Kind     `json:"outcome"`
	Reasons []outcome.Reason `json:"reasons,omitempty"`
	Dir     string           `json:"dir,omitempty"`
	// Attempts lists every run of the scenario: more than one only when a harness error was retried.
	Attempts []SuiteAttempt `json:"attempts,omitempty"`
	// Replay is the command that runs the scenario again exactly as it ran (file, seed, settings).
	Replay          string  `json:"replay"`
	DurationSeconds float64 `json:"duration_s"`
}

// SuiteAttempt is one run of a scenario.
type SuiteAttempt struct {
	Dir             string           `json:"dir,omitempty"`
	Outcome         outcome.Kind     `json:"outcome"`
	Reasons         []outcome.Reason `json:"reasons,omitempty"`
	DurationSeconds float64          `json:"duration_s"`
}

// Retried reports whether the scenario ran more than once.
func (s *SuiteScenario) Retried() bool { return len(s.Attempts) > 1 }

// Verdict returns the scenario's outcome.
func (s *SuiteScenario) Verdict() outcome.Outcome {
	return outcome.Outcome{Kind: s.Outcome, Reasons: s.Reasons}
}

// DecideSuite is the suite's outcome from its scenarios' outcomes, by the precedence of outcome.Decide: a
// violation in any scenario makes the suite a violation, an undecided check is never a pass, and so on.
// Each reason names its scenario and that scenario's most severe reason.
func DecideSuite(scenarios []SuiteScenario) outcome.Outcome {
	var rs []outcome.Reason
	for _, sc := range scenarios {
		if sc.Outcome == outcome.OK {
			continue
		}
		text := string(sc.Outcome)
		if len(sc.Reasons) > 0 {
			text = sc.Reasons[0].Text
			if n := len(sc.Reasons) - 1; n > 0 {
				text += fmt.Sprintf(" (and %d more)", n)
			}
		}
		rs = append(rs, outcome.New(sc.Outcome, "%s: %s", sc.Name, text))
	}
	return outcome.Decide(rs...)
}

// SetOutcome decides the suite's outcome and stores it.
func (s *Suite) SetOutcome() outcome.Outcome {
	o := DecideSuite(s.Scenarios)
	s.Outcome, s.Reasons = o.Kind, o.Reasons
	return o
}

// Verdict returns the suite's stored outcome.
func (s *Suite) Verdict() outcome.Outcome {
	return outcome.Outcome{Kind: s.Outcome, Reasons: s.Reasons}
}

// WriteSuite writes suite.json into dir.
func WriteSuite(dir string, s *Suite) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return fmt.Errorf("encode %s: %w", SuiteFile, err)
	}
	if err := os.WriteFile(filepath.Join(dir, SuiteFile), append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", SuiteFile, err)
	}
	return nil
}

// ReadSuite reads suite.json from dir.
func ReadSuite(dir string) (*Suite, error) {
	b, err := os.ReadFile(filepath.Join(dir, SuiteFile))
	if err != nil {
		return nil, fmt.Errorf("read suite: %w", err)
	}
	var s Suite
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, SuiteFile), err)
	}
	return &s, nil
}
