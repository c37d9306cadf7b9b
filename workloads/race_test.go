//go:build race

package workloads

// raceEnabled: the race detector slows the generator about tenfold, so timing assertions do not hold.
const raceEnabled = true
