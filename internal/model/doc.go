// Package model is the model-based differential test of the stores. It
// has a deliberately simple reference limiter ([Model]), written from each
// algorithm's definition. It has a runner that drives operation sequences
// through the stores and the model at once. The runner compares every
// answer and checks what every answer must satisfy.
//
// A sequence is decoded from a byte string, so `go test -fuzz` can mutate
// it. [Seeds] gives fixed pseudo-random ones for the seeded runs inside
// `make test`. A sequence holds:
//   - AllowN, Peek, Reset, and AllowAll of 1 to 8 limits;
//   - the clock moved forward by small and large steps, to window
//     boundaries (calendar ones too) and to the instants answers named,
//     and sometimes back;
//   - a store's host clock skewed from it ([Env].HostClock);
//   - a limit's count or burst changed; a fixed window's calendar unit
//     or zone changed, a calendar made a plain window or back;
//   - costs from 1 to [redlimit.MaxCost], biased to the edges.
//
// For each operation the runner checks:
//   - every store gives the same answer (or the same sentinel error),
//     field by field;
//   - the model gives that answer too, whatever came before: a clock that
//     stepped back, a count or burst changed for a key that holds state.
//     The model follows the rules the stores document for both. Each
//     exception is documented by its store. A Redis Cluster refund of a
//     full token bucket makes the cluster stricter should the clock go
//     back ([Target].Split). A bounded memory store refuses an admission
//     or check it has no room for ([Target].Refused). It fails debits it
//     cannot hold ([Target].Full). There the clock does not go back
//     ([Options].NoClockBack): it would find again the idle states the
//     store evicted. A debit is never refused. The debit right after a
//     check that passed, alone in its decision, never fails for want of
//     room;
//   - each Result on its own: Max is the limit's Max, Remaining in
//     [0, Max], RetryAfter 0 when allowed. RetryAfter is Never exactly
//     when the cost is above Max. ResetAfter is 0 only at a full
//     allowance;
//   - RetryAfter is honest, asked of the model. The same cost passes at
//     now+RetryAfter and not 1 µs before, if nothing else happens.
//     ResetAfter is honest too: the allowance is full then, and not 1 µs
//     before;
//   - a denied AllowAll consumed nothing: each of its results is what Peek
//     answers afterwards, on every store;
//   - the exact algorithms never admit above their limit. The fixed window
//     holds per window, the sliding window too. The sliding log holds in
//     every interval of one period. The token bucket holds burst plus one
//     token per emission interval in every interval. Each request counts
//     at the instant the clock-back rules count it at.
//
// On a failure [Check] replays shorter sequences to find a short one that
// fails the same check, and prints it as Go source for a regression test.
package model
