package compare

import (
	"fmt"
	"strings"

	"github.com/etcd-chaosbench/chaosbench/results"
)

// CheckMachines returns warnings when runs were measured on a different machine than the baseline's
// first run (see results.Environment.Facts: hardware, kernel, storage, limits; only facts both runs
// recorded count): their differences may then be the machines', not the variants'. With acrossHosts the
// comparison is across hosts on purpose, and the warning becomes a note. Runs that recorded no
// environment are not counted.
func CheckMachines(variants []Variant, acrossHosts bool) []string {
	var ref *results.Environment
	var lines []string
	for _, v := range variants {
		for i, r := range v.Runs {
			if r.Summary == nil || r.Summary.Environment == nil {
				continue
			}
			if ref == nil {
				ref = r.Summary.Environment
				continue
			}
			if diff := differences(ref, r.Summary.Environment); diff != "" {
				name := v.Label
				if len(v.Runs) > 1 {
					name += fmt.Sprintf(" round %d", i+1)
				}
				lines = append(lines, fmt.Sprintf("  %s: %s", name, diff))
			}
		}
	}
	if len(lines) == 0 {
		return nil
	}
	head := "WARNING: runs were measured on other machines than the baseline's first run; differences may be the machines', not the variants' (--across-hosts if that is the point):"
	if acrossHosts {
		head = "Across hosts (--across-hosts): runs were measured on other machines than the baseline's first run:"
	}
	return append([]string{head}, lines...)
}

// differences lists the facts both environments recorded that differ: "cpus 8 (baseline 2)".
func differences(ref, e *results.Environment) string {
	base := map[string]string{}
	for _, f := range ref.Facts() {
		base[f.Name] = f.Value
	}
	var out []string
	for _, f := range e.Facts() {
		if b, ok := base[f.Name]; ok && b != f.Value {
			out = append(out, fmt.Sprintf("%s %s (baseline %s)", f.Name, f.Value, b))
		}
	}
	return strings.Join(out, "; ")
}
