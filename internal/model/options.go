package model

// Options tune a run.
type Options struct {
	// MaxOps bounds a sequence's operations (default 300).
	MaxOps int
	// NoClockBack keeps the clock from going back: for a store that forgets
	// idle states (a memory store at its bounds evicts them), which a
	// clock that went back would find again on the others.
	NoClockBack bool
	// NoDebits keeps debits out of the sequences (and the regressions):
	// for a store that does not count them yet.
	NoDebits bool
}

func (o Options) maxOps() int {
	if o.MaxOps > 0 {
		return o.MaxOps
	}
	return 300
}
