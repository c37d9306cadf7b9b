package linearizability

// WithPhaseHook returns opts with fn called as each phase of a check ends, and ten times during the
// replay: the benchmarks measure the live heap there.
func WithPhaseHook(opts Options, fn func(phase string)) Options {
	opts.phaseDone = fn
	return opts
}
