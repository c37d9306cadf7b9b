//go:build race

package faults

// raceEnabled: the race detector slows members and clients severalfold, so latency assertions do not hold.
const raceEnabled = true
