package results

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// writeFaultsText prints the fault windows of a run with their availability figures, and the latency of
// each operation in the steady, fault and recovery phases. Runs without faults print nothing.
func writeFaultsText(w io.Writer, s *Summary) error {
	if len(s.Faults) == 0 && len(s.Phases) == 0 {
		return nil
	}
	if len(s.Faults) > 0 {
		recovered := 0
		for _, f := range s.Faults {
			if f.Outcome == "recovered" {
				recovered++
			}
		}
		fmt.Fprintf(w, "faults: %d windows, %d recovered\n", len(s.Faults), recovered)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  fault\ttargets\tleader\twindow\toutcome\twrite gap\tread gap\telection\tleader changes\terrors")
		for _, f := range s.Faults {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.Spec, dash(strings.Join(f.Targets, ",")), dash(f.Leader),
				windowText(f), outcomeText(f.Outcome), gapText(f.Availability, AccessWrite), gapText(f.Availability, AccessRead),
				electionText(f.Availability), changesText(f.Availability), availErrorsText(f.Availability))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		for _, f := range s.Faults {
			if f.Effect != nil {
				fmt.Fprintf(w, "  %s: %s\n", f.Spec, f.Effect.Detail)
			}
		}
	}
	if len(s.Phases) == 0 {
		return nil
	}
	fmt.Fprintln(w, "by phase (response time):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\toperation\tseconds\tcount\tops/s\tp50\tp99\tmax\terrors\t")
	for _, name := range []string{PhaseSteady, PhaseFault, PhaseRecovery} {
		ph := s.Phases[name]
		if ph == nil {
			continue
		}
		ops := make([]string, 0, len(ph.Operations))
		for op := range ph.Operations {
			ops = append(ops, op)
		}
		sort.Strings(ops)
		if len(ops) == 0 {
			fmt.Fprintf(tw, "%s\t-\t%.1f\t0\t\t\t\t\t\t\n", name, ph.Seconds)
		}
		for _, op := range ops {
			o := ph.Operations[op]
			fmt.Fprintf(tw, "%s\t%s\t%.1f\t%d\t%.1f\t%s\t%s\t%s\t%s\t\n", name, op, ph.Seconds, o.Count, o.Throughput,
				fmtMs(o.Response.P50), fmtMs(o.Response.P99), fmtMs(o.Response.Max), errorText(o))
		}
	}
	return tw.Flush()
}

// outcomeText keeps the table to one line per window: what went wrong in detail is in the run's errors.
func outcomeText(o string) string {
	if i := strings.IndexAny(o, ":\n"); i >= 0 {
		o = o[:i]
	}
	return o
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func windowText(f FaultWindow) string {
	start := time.Duration(f.StartNs).Seconds()
	end := time.Duration(f.EndNs).Seconds()
	return fmt.Sprintf("%.2fs-%.2fs", start, end)
}

// gapText shows a window's write or read gap: "no writes" when none was made, ">" before a gap still
// open when the observation ended.
func gapText(a *Availability, access Access) string {
	if a == nil {
		return "-"
	}
	n, gap, open := a.Writes, a.WriteGapMs, a.WriteGapOpen
	if access == AccessRead {
		n, gap, open = a.Reads, a.ReadGapMs, a.ReadGapOpen
	}
	switch {
	case n == 0 && !open:
		return "no " + access.String() + "s"
	case open:
		return ">" + fmtMs(gap)
	}
	return fmtMs(gap)
}

func electionText(a *Availability) string {
	if a == nil || a.TimeToLeaderMs == nil {
		return "-"
	}
	return fmtMs(*a.TimeToLeaderMs) + " -> " + a.NewLeader
}

func changesText(a *Availability) string {
	if a == nil {
		return "-"
	}
	return fmt.Sprint(a.LeaderChanges)
}

func availErrorsText(a *Availability) string {
	if a == nil {
		return "-"
	}
	if a.Errors == 0 {
		return "0"
	}
	return errorText(&Operation{Errors: a.Errors, ErrorsByClass: a.ErrorsByClass})
}
