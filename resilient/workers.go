package resilient

import (
	"context"

	"github.com/redlimit/redlimit"
	"github.com/redlimit/redlimit/internal/kept"
)

// maxWorkers bounds the goroutines a Limiter keeps waiting for calls
// between them. More calls at once than that still run, each on a
// goroutine of its own that ends with it.
const maxWorkers = 256

// workers run the store calls of bounded and probe off their caller's
// goroutine, on goroutines kept between calls. The caller has to be free
// to give up at the deadline while the client library has not answered.
// A store that returns by its context's deadline needs no worker (see
// contextBound).
type workers struct{ pool *kept.Pool[job] }

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

func newWorkers(max int32) workers { return workers{kept.New(max, job.run)} }

// start hands the call c, with ctx, to a waiting worker, or to a new
// goroutine when none waits. It returns the channel its answer comes on.
// The answer comes once after, if not nil, has been called. A caller that
// gives up need not receive it.
func (w *workers) start(ctx context.Context, l *Limiter, c storeCall, after func(error)) <-chan reply {
	ch := make(chan reply, 1)
	w.pool.Go(job{ctx: ctx, l: l, c: c, after: after, reply: ch})
	return ch
}

func (j job) run() {
	d, err := j.c.do(j.ctx, j.l)
	if j.after != nil {
		j.after(err)
	}
	j.reply <- reply{d, err}
}

// close ends the waiting workers; those running a call end after it.
func (w *workers) close() { w.pool.Close() }
