package report

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// Files a report writes into a run directory.
const (
	MarkdownFile = "report.md"
	HTMLFile     = "report.html"
	JUnitFile    = "junit.xml"
	PerfdashFile = "perfdash.json"
)

// Prepare evaluates thresholds (results.EvaluateThresholds, against r.Evidence) and diagnoses the run,
// storing both in r and in its summary, and decides the run's outcome again with them.
func Prepare(r *Run, ts []results.Threshold) {
	r.Thresholds = results.EvaluateThresholds(ts, r.Evidence())
	r.Diagnosis = Diagnose(r)
	r.Summary.Thresholds, r.Summary.Diagnosis = r.Thresholds, r.Diagnosis
	// The thresholds are part of the outcome: decide it again with them.
	r.Summary.SetOutcome()
}

// Write writes report.md, report.html, junit.xml and perfdash.json into the run directory.
func Write(r *Run) error {
	var errs []error
	for _, f := range []struct {
		name  string
		write func(io.Writer, *Run) error
	}{
		{MarkdownFile, WriteMarkdown},
		{HTMLFile, WriteHTML},
		{JUnitFile, WriteJUnit},
		{PerfdashFile, WritePerfdash},
	} {
		errs = append(errs, writeFile(filepath.Join(r.Dir, f.name), func(w io.Writer) error { return f.write(w, r) }))
	}
	return errors.Join(errs...)
}

// writeFile renders into memory first, so that a failed render does not leave half a file behind.
func writeFile(path string, render func(io.Writer) error) error {
	var buf bytes.Buffer
	if err := render(&buf); err != nil {
		return fmt.Errorf("render %s: %w", filepath.Base(path), err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	return nil
}
