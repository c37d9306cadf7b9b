package workloads

import "time"

// Pacer is a load schedule: At(n) is when the n-th operation (from 0) should start, as an offset from the
// start of the load. Pacers are pure functions of n, so schedules are tested with tables, without a clock.
type Pacer interface {
	At(n uint64) time.Duration
}

// Constant is a constant arrival rate in operations per second.
type Constant struct{ Rate float64 }

// At returns n/Rate seconds.
func (p Constant) At(n uint64) time.Duration {
	return time.Duration(float64(n) / p.Rate * float64(time.Second))
}

// Slots returns how many operations a pacer schedules before d: the first n with At(n) >= d.
func Slots(p Pacer, d time.Duration) uint64 {
	lo, hi := uint64(0), uint64(1)
	for p.At(hi) < d {
		lo, hi = hi, hi*2
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		if p.At(mid) < d {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}
