package chaosbench

import "github.com/etcd-chaosbench/chaosbench/results/compare"

// DefaultMinEffect is the practical threshold of compare, report and trend as a fraction (0.05 = 5%): a
// smaller change is no difference even when significant. It is the comparison engine's own default, named
// here so that a flag can show it.
const DefaultMinEffect = compare.DefaultMinEffect

// ParseGate reads a --fail-on-regression value into the FailOnRegression and RegressionFigures of
// CompareOptions, ReportOptions and TrendOptions: "" is no gate, "all" a gate on every figure (nil), else
// the comma-separated figures (put:p99) or operations (put) it watches. A malformed list is a usage error.
func ParseGate(spec string) (on bool, figures []string, err error) {
	if spec == "" {
		return false, nil, nil
	}
	figures, err = compare.ParseGate(spec)
	return err == nil, figures, err
}
