// Package kept runs values through a function on goroutines kept between
// calls, as grpc.NumStreamWorkers runs requests. A goroutine made per call
// would grow its stack, by copying, to what a client library needs. It
// would do so every time (docs/BENCHMARKS.md).
package kept

import (
	"sync"
	"sync/atomic"
)

// Pool runs each value it is given through its function. It runs on a
// goroutine that waits for values, or on a new one when none waits. It
// keeps at most max goroutines waiting; the others end after their value.
// Safe for concurrent use.
type Pool[T any] struct {
	run  func(T)
	jobs chan T // unbuffered: a send succeeds only when a goroutine waits
	quit chan struct{}
	once sync.Once
	n    atomic.Int32 // goroutines waiting for values or running one
	max  int32
}

// New returns a Pool that runs values through run on at most max kept
// goroutines.
func New[T any](max int32, run func(T)) *Pool[T] {
	return &Pool[T]{run: run, jobs: make(chan T), quit: make(chan struct{}), max: max}
}

// Go runs v through the Pool's function on another goroutine, and returns
// at once.
func (p *Pool[T]) Go(v T) {
	select {
	case p.jobs <- v:
	default:
		go p.work(v)
	}
}

// work runs v, then stays to run further values, unless max goroutines are
// kept already or the Pool is closed.
func (p *Pool[T]) work(v T) {
	p.run(v)
	if p.n.Add(1) > p.max {
		p.n.Add(-1)
		return
	}
	defer p.n.Add(-1)
	for {
		select {
		case v := <-p.jobs:
			p.run(v)
		case <-p.quit:
			return
		}
	}
}

// Close ends the waiting goroutines; those running a value end after it.
// Go still runs values after Close, each on a goroutine of its own.
func (p *Pool[T]) Close() { p.once.Do(func() { close(p.quit) }) }
