package compare

import (
	"fmt"
	"strings"
)

// CheckMachines returns warnings when the variants' runs were measured on different machines (see
// results.Environment.Machine: hardware, kernel, storage, limits): their differences may then be the
// machines', not the variants'. With acrossHosts the comparison is across hosts on purpose, and the
// warning becomes a note. Runs that recorded no environment are not counted.
func CheckMachines(variants []Variant, acrossHosts bool) []string {
	type where struct{ labels []string }
	byMachine := map[string]*where{}
	var machines []string
	for _, v := range variants {
		for _, r := range v.Runs {
			if r.Summary == nil || r.Summary.Environment == nil {
				continue
			}
			m := r.Summary.Environment.Machine()
			w := byMachine[m]
			if w == nil {
				w = &where{}
				byMachine[m] = w
				machines = append(machines, m)
			}
			if !contains(w.labels, v.Label) {
				w.labels = append(w.labels, v.Label)
			}
		}
	}
	if len(machines) < 2 {
		return nil
	}
	head := "WARNING: the runs were measured on different machines; differences may be the machines', not the variants' (--across-hosts if that is the point):"
	if acrossHosts {
		head = "Across hosts (--across-hosts): the runs were measured on different machines:"
	}
	out := []string{head}
	for _, m := range machines {
		out = append(out, fmt.Sprintf("  %s: %s", strings.Join(byMachine[m].labels, ", "), m))
	}
	return out
}

func contains(ss []string, s string) bool {
	for _, x := range ss {
		if x == s {
			return true
		}
	}
	return false
}
