package redisstore

import (
	"fmt"
	"strconv"
	"time"

	"github.com/redlimit/redlimit"
)

// The batch script's wire format (lua/batch.lua): every call of the Store
// is one run of it, with one entry or more. A call is built with a wire
// and its reply read with a reply, in the order the script reads them.
//
// ARGV, in order:
//   - the entries, three bytes each: kind, x, m. For kindAllow and
//     kindPeek, x is the number (from 1) of the entry's limit. m is how
//     many identical decisions on one key it holds. For the other kinds,
//     x is the number of limits and m is 1;
//   - the time in µs, or "" for the server's clock;
//   - the µs added to every TTL;
//   - the number of limits of the one-limit entries;
//   - "" when the keys are KEYS; otherwise their number, then the keys;
//   - those limits, four values each: algorithm, window (see windowText),
//     count (token bucket: burst), cost;
//   - each entry of another kind, in order, its values: limitValues per
//     limit; a refund's time first; a give-back's records last; a
//     lease's slots, TTL µs and id.
//
// KEYS, each entry's in order: one for a one-limit entry, one per limit
// for the others, and a once's marker after its limit's.
//
// The reply, in order:
//   - the time the script decided at;
//   - each entry's values (see reply);
//   - per entry that failed on its key, its number and the kind of failure;
//   - how many failed.

// entryKind is what an entry asks the batch script.
type entryKind byte

const (
	kindAllow    entryKind = 'a' // AllowN: one limit
	kindPeek     entryKind = 'p' // Peek: one limit
	kindSeveral  entryKind = 's' // AllowAll: several limits, admissions and debits
	kindAdmit    entryKind = 'm' // Admit: kindSeveral with refund records
	kindReset    entryKind = 'r' // Reset
	kindRefund   entryKind = 'f' // the refund of a group after another group denied
	kindGiveBack entryKind = 'g' // Refund of a Grant
	kindOnce     entryKind = 'o' // DebitOnce
	kindQueue    entryKind = 'q' // Queue: a token bucket's turn
	kindUnqueue  entryKind = 'u' // Unqueue: a turn given back
	kindAcquire  entryKind = 'c' // Acquire: a lease of one key
	kindRenew    entryKind = 'e' // Renew
	kindRelease  entryKind = 'x' // Release
)

// limitValues is how many values each limit of an entry of several limits
// has. They are algorithm, window µs, count, burst, emission interval µs
// and cost. Last comes 1 for a debit or 0 for an admission; a refund's is
// its mark.
const limitValues = 7

// wireLimit is a limit of the one-limit entries, sent once per batch: the
// decisions of a batch mostly share a few.
type wireLimit struct {
	alg                 redlimit.Algorithm
	window, count, cost int64
	cal                 bounds // a calendar limit's windows, or none
}

// bounds are the boundaries (µs) of three calendar windows in a row, or
// all zero for none.
type bounds [4]int64

// wire is one call of the batch script being built.
type wire struct {
	now    int64  // µs: the host's clock, around which calendar windows are sent
	ents   []byte // three bytes per entry
	limits []wireLimit
	keys   []string
	vals   []string // the values of the entries of other kinds, in order
	buf    [8]wireLimit
}

// one adds a decision of kind (kindAllow or kindPeek) of r on key. It
// joins the last entry when that is the same decision on the same key,
// up to maxBatch of them.
func (w *wire) one(kind entryKind, key string, r redlimit.Request) {
	l := r.Limit
	x := wireLimit{alg: l.Algorithm, window: l.Period.Microseconds(), count: l.Count, cost: r.Cost, cal: w.bounds(l)}
	if l.Algorithm == redlimit.TokenBucket {
		x.window, x.count = l.EmissionInterval(), l.Burst
	}
	if w.limits == nil {
		w.limits = w.buf[:0]
	}
	k := 0
	for k < len(w.limits) && w.limits[k] != x {
		k++
	}
	if k == len(w.limits) {
		w.limits = append(w.limits, x)
	}
	if n := len(w.ents); n > 0 && entryKind(w.ents[n-3]) == kind && int(w.ents[n-2]) == k+1 && w.keys[len(w.keys)-1] == key && w.ents[n-1] < maxBatch {
		w.ents[n-1]++
		return
	}
	w.ents = append(w.ents, byte(kind), byte(k+1), 1)
	w.keys = append(w.keys, key)
}

// several adds an entry of kind (kindSeveral, kindAdmit or kindReset) of
// reqs on keys.
func (w *wire) several(kind entryKind, keys []string, reqs []redlimit.Request) {
	w.ents = append(w.ents, byte(kind), byte(len(reqs)), 1)
	w.keys = append(w.keys, keys...)
	for _, r := range reqs {
		w.limit(r, debitValue(r.Debit))
	}
}

// refund adds an entry of kind (kindRefund or kindGiveBack) giving back
// reqs on keys, decided at at (µs). Each request has its mark. A give-back
// has recsPer records per request (see receipt).
func (w *wire) refund(kind entryKind, at int64, keys []string, reqs []redlimit.Request, marks, recs []int64) {
	w.ents = append(w.ents, byte(kind), byte(len(reqs)), 1)
	w.keys = append(w.keys, keys...)
	w.vals = append(w.vals, strconv.FormatInt(at, 10))
	for i, r := range reqs {
		w.limit(r, strconv.FormatInt(marks[i], 10))
	}
	if kind == kindGiveBack {
		for _, v := range recs {
			w.vals = append(w.vals, strconv.FormatInt(v, 10))
		}
	}
}

// once adds a debit of r on key counted at most once by its marker,
// which lives ttl.
func (w *wire) once(key, marker string, r redlimit.Request, ttl int64) {
	w.ents = append(w.ents, byte(kindOnce), 1, 1)
	w.keys = append(w.keys, key, marker)
	w.limit(r, debitValue(true))
	w.vals = append(w.vals, strconv.FormatInt(ttl, 10))
}

// queue adds an entry of kind (kindQueue or kindUnqueue) of r on key,
// with last: the maximum wait µs, or the TAT to give back from.
func (w *wire) queue(kind entryKind, key string, r redlimit.Request, last int64) {
	w.ents = append(w.ents, byte(kind), 1, 1)
	w.keys = append(w.keys, key)
	w.limit(r, strconv.FormatInt(last, 10))
}

// lease adds an entry of kind (kindAcquire, kindRenew or kindRelease) of
// lease id under c on key.
func (w *wire) lease(kind entryKind, key string, c redlimit.Concurrency, id string) {
	w.ents = append(w.ents, byte(kind), 1, 1)
	w.keys = append(w.keys, key)
	w.vals = append(w.vals, strconv.FormatInt(c.Slots, 10), strconv.FormatInt(c.TTL.Microseconds(), 10), id)
}

// bounds returns the windows of l's calendar sent around w.now: the
// start of the window before the one that holds it, that window's start
// and end, and the end of the window after it. None for other limits.
func (w *wire) bounds(l redlimit.Limit) bounds {
	if l.Calendar.IsZero() {
		return bounds{}
	}
	start, end := l.Calendar.Window(time.UnixMicro(w.now))
	prev, _ := l.Calendar.Window(start.Add(-time.Microsecond))
	_, next := l.Calendar.Window(end)
	return bounds{prev.UnixMicro(), start.UnixMicro(), end.UnixMicro(), next.UnixMicro()}
}

// windowText returns a window on the wire: window µs, or for a calendar
// limit "c" and its bounds b, comma-separated, the middle window's first
// (the script reads them first). Only Go does calendar arithmetic. The
// script takes the window that holds its own clock, and fails a decision
// if none does (lua/prelude.lua, window). So hosts whose clocks differ by
// less than the shortest window count in the window of Redis's clock.
func windowText(window int64, b bounds) string {
	if b == (bounds{}) {
		return strconv.FormatInt(window, 10)
	}
	return "c" + strconv.FormatInt(b[1], 10) + "," + strconv.FormatInt(b[2], 10) + "," +
		strconv.FormatInt(b[0], 10) + "," + strconv.FormatInt(b[3], 10)
}

func debitValue(debit bool) string {
	if debit {
		return "1"
	}
	return "0"
}

// limit appends r's limitValues values, the last being last.
func (w *wire) limit(r redlimit.Request, last string) {
	l := r.Limit
	var ei int64
	if l.Algorithm == redlimit.TokenBucket {
		ei = l.EmissionInterval()
	}
	w.vals = append(w.vals,
		strconv.Itoa(int(l.Algorithm)),
		windowText(l.Period.Microseconds(), w.bounds(l)),
		strconv.FormatInt(l.Count, 10),
		strconv.FormatInt(l.Burst, 10),
		strconv.FormatInt(ei, 10),
		strconv.FormatInt(r.Cost, 10),
		last,
	)
}

// entries is how many entries w holds.
func (w *wire) entries() int { return len(w.ents) / 3 }

// args returns the call's KEYS and ARGV at the time at, with the TTL
// margin margin. ARGV holds "" for the server's clock. With inArgv, the
// keys go in ARGV and KEYS holds the first only (a Cluster node's batch).
func (w *wire) args(at, margin string, inArgv bool) (keys, args []string) {
	n := 5 + 4*len(w.limits) + len(w.vals)
	if inArgv {
		n += len(w.keys)
	}
	args = make([]string, 5, n)
	args[0], args[1], args[2], args[3] = string(w.ents), at, margin, strconv.Itoa(len(w.limits))
	keys = w.keys
	if inArgv {
		args[4] = strconv.Itoa(len(w.keys))
		args = append(args, w.keys...)
		keys = w.keys[:1]
	}
	for _, x := range w.limits {
		args = append(args, strconv.Itoa(int(x.alg)), windowText(x.window, x.cal), strconv.FormatInt(x.count, 10), strconv.FormatInt(x.cost, 10))
	}
	return keys, append(args, w.vals...)
}

// reply reads the batch script's reply, entry by entry in the order of
// the wire: next, then the entry's values.
type reply struct {
	now   int64
	v     []int64 // the entries' values not read yet
	fails []int64 // the failed entries not reached yet: number and kind
	entry int64   // the entry being read, from 1
	bad   bool
}

// readReply returns the reply v, or false if it cannot be one.
func readReply(v []int64) (reply, bool) {
	if len(v) < 2 {
		return reply{}, false
	}
	nf := v[len(v)-1]
	if nf < 0 || 2*nf > int64(len(v)-2) {
		return reply{}, false
	}
	return reply{now: v[0], v: v[1 : len(v)-1-int(2*nf)], fails: v[len(v)-1-int(2*nf) : len(v)-1]}, true
}

// next moves to the next entry and returns the kind of its failure, 0 if
// it did not fail (see entryError).
func (r *reply) next() (failure int64) {
	r.entry++
	if len(r.fails) > 0 && r.fails[0] == r.entry {
		failure, r.fails = r.fails[1], r.fails[2:]
		if failure == 0 {
			r.bad = true
		}
	}
	return failure
}

// values reads n values, or returns nil if there are fewer.
func (r *reply) values(n int) []int64 {
	if len(r.v) < n {
		r.bad = true
		return nil
	}
	x := r.v[:n]
	r.v = r.v[n:]
	return x
}

// decisions reads the answers of a one-limit entry of m decisions, and
// gives each to put, in order: allowed, remaining, retry-after µs (-1 for
// never) and reset-after µs. One decision allowed answers two values:
// remaining, reset-after. One denied answers three: -1 - remaining,
// retry-after, reset-after. With m > 1, it answers segments. For c
// allowed: c, remaining, reset-after, and their steps. For the c denied
// that end the entry: -c, remaining, retry-after, reset-after.
func (r *reply) decisions(m int, put func(j int, allowed bool, remaining, retry, reset int64)) {
	v := r.v
	switch {
	case m == 1 && len(v) >= 2 && v[0] >= 0:
		put(0, true, v[0], 0, v[1])
		r.v = v[2:]
		return
	case m == 1 && len(v) >= 3:
		put(0, false, -1-v[0], v[1], v[2])
		r.v = v[3:]
		return
	case m == 1:
		r.bad = true
		return
	}
	for j := 0; j < m; {
		switch c := int64(m - j); {
		case len(v) >= 5 && v[0] > 0 && v[0] <= c:
			for k := range v[0] {
				put(j, true, v[1]+k*v[3], 0, v[2]+k*v[4])
				j++
			}
			v = v[5:]
		case len(v) >= 4 && v[0] == -c:
			for ; j < m; j++ {
				put(j, false, v[1], v[2], v[3])
			}
			v = v[4:]
		default:
			r.bad = true
			return
		}
	}
	r.v = v
}

// ok reports whether the reply was read whole, each value where expected.
func (r *reply) ok() bool { return !r.bad && len(r.v) == 0 && len(r.fails) == 0 }

// entryError is the error of an entry of op that failed alone, of the
// kind the batch script replied (see lua/prelude.lua, key_failure).
func entryError(op string, kind int64) error {
	what := "state the script cannot parse"
	switch kind {
	case 1:
		what = "a key of another type (WRONGTYPE)"
	case 3:
		return fmt.Errorf("redisstore: %s: %w", op, redlimit.ErrClockSkew)
	}
	return fmt.Errorf("redisstore: %s: %w: %s", op, redlimit.ErrKeyState, what)
}

// result makes r's result from four values: allowed (1/0), remaining,
// retry-after µs (-1 for never) and reset-after µs.
func result(r redlimit.Request, v []int64) redlimit.Result {
	return resultOf(r, v[0] == 1, v[1], v[2], v[3])
}

// resultOf is result of the values allowed, remaining, retry-after µs (-1
// for never) and reset-after µs.
func resultOf(r redlimit.Request, allowed bool, remaining, retry, reset int64) redlimit.Result {
	res := redlimit.Result{
		Allowed:    allowed,
		Max:        r.Limit.Max(),
		Remaining:  remaining,
		RetryAfter: fromMicros(retry),
		ResetAfter: fromMicros(reset),
	}
	if retry < 0 {
		res.RetryAfter = redlimit.Never
	}
	return res
}
