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

// workers run the store calls of bounded. A call must not run on its
// caller's goroutine, which has to be free to give up at the deadline
// while the client library has not answered yet; but starting a goroutine
// per call costs more than the call's own Go code: the new goroutine's
// stack grows, by copying, to what the client library needs, every time.
// So the goroutines are kept and handed one call after another, the way
// grpc.NumStreamWorkers runs requests.
type workers struct {
	jobs chan *job // unbuffered: a send succeeds only when a worker waits
	quit chan struct{}
	once sync.Once
	n    atomic.Int32 // workers waiting for jobs or running one
	max  int32
	pool sync.Pool // of *job
}

// job is one call: made by a worker, waited for by bounded.
type job struct {
	ctx  context.Context
	l    *Limiter
	c    storeCall
	d    redlimit.Decision
	err  error
	done chan struct{} // buffered: the worker never waits for the caller
}

func newWorkers(max int32) workers {
	return workers{jobs: make(chan *job), quit: make(chan struct{}), max: max}
}

// start hands the call c, with ctx, to a waiting worker, or to a new
// goroutine when none waits, and returns its job: j.done receives once j.d
// and j.err are set.
func (w *workers) start(ctx context.Context, l *Limiter, c storeCall) *job {
	j, _ := w.pool.Get().(*job)
	if j == nil {
		j = &job{done: make(chan struct{}, 1)}
	}
	j.ctx, j.l, j.c = ctx, l, c
	select {
	case w.jobs <- j:
	default:
		go w.work(j)
	}
	return j
}

// release returns a job whose done was received, for another call. A job
// whose caller gave up is never released: its worker may still write it.
func (w *workers) release(j *job) {
	*j = job{done: j.done}
	w.pool.Put(j)
}

// work runs j, then stays to run further jobs, unless max workers are kept
// already or the Limiter is closed.
func (w *workers) work(j *job) {
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

func (j *job) run() {
	j.d, j.err = j.c.do(j.ctx, j.l)
	j.done <- struct{}{}
}

// close ends the waiting workers; those running a call end after it.
func (w *workers) close() { w.once.Do(func() { close(w.quit) }) }
