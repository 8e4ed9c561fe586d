package resilient

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/redlimit/redlimit"
)

// maxWorkers bounds the goroutines a Limiter keeps waiting for calls
// between them. More calls at once than that still run, each on a
// goroutine of its own that ends with it.
const maxWorkers = 256

// workers run the store calls of bounded and probe, off their caller's
// goroutine, which has to be free to give up at the deadline while the
// client library has not answered yet. The goroutines are kept and handed
// one call after another, as grpc.NumStreamWorkers runs requests: a new
// goroutine per call would grow its stack, by copying, to what the client
// library needs, every time (BenchmarkAsk; docs/BENCHMARKS.md).
type workers struct {
	jobs chan job // unbuffered: a send succeeds only when a worker waits
	quit chan struct{}
	once sync.Once
	n    atomic.Int32 // workers waiting for jobs or running one
	max  int32
}

// job is one store call, and where its answer goes.
type job struct {
	ctx   context.Context
	l     *Limiter
	c     storeCall
	after func(error)  // if set, called with the call's error before the answer is sent
	reply chan<- reply // buffered: the worker never waits for the caller
}

// reply is the answer to a job.
type reply struct {
	d   redlimit.Decision
	err error
}

func newWorkers(max int32) workers {
	return workers{jobs: make(chan job), quit: make(chan struct{}), max: max}
}

// start hands the call c, with ctx, to a waiting worker, or to a new
// goroutine when none waits, and returns the channel its answer comes on,
// once after, if not nil, has been called. A caller that gives up need not
// receive it.
func (w *workers) start(ctx context.Context, l *Limiter, c storeCall, after func(error)) <-chan reply {
	ch := make(chan reply, 1)
	j := job{ctx: ctx, l: l, c: c, after: after, reply: ch}
	select {
	case w.jobs <- j:
	default:
		go w.work(j)
	}
	return ch
}

// work runs j, then stays to run further jobs, unless max workers are kept
// already or the Limiter is closed.
func (w *workers) work(j job) {
	j.run()
	if w.n.Add(1) > w.max {
		w.n.Add(-1)
		return
	}
	defer w.n.Add(-1)
	for {
		select {
		case j := <-w.jobs:
			j.run()
		case <-w.quit:
			return
		}
	}
}

func (j job) run() {
	d, err := j.c.do(j.ctx, j.l)
	if j.after != nil {
		j.after(err)
	}
	j.reply <- reply{d, err}
}

// close ends the waiting workers; those running a call end after it.
func (w *workers) close() { w.once.Do(func() { close(w.quit) }) }
