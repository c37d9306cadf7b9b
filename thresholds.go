package chaosbench

import "github.com/etcd-chaosbench/chaosbench/results/report"

// ThresholdGrammar is the one-line grammar of a threshold (--threshold of run and report), for help texts:
// named here so that they say exactly what the threshold parser accepts.
const ThresholdGrammar = report.ThresholdGrammar
