// Package model is the model-based differential test of the stores: a
// deliberately simple reference limiter ([Model]), written from each
// algorithm's definition, and a runner that drives operation sequences
// through the stores and the model at once, comparing every answer and
// checking what every answer must satisfy.
//
// A sequence (AllowN, Peek, Reset, AllowAll of 1 to 8 limits; the clock
// moved forward by small and large steps, to window boundaries (calendar
// ones too) and to the instants answers named, and sometimes back; a
// store's host clock skewed from it ([Env].HostClock); a limit's count or burst
// changed; costs from 1 to [redlimit.MaxCost], biased to the edges) is
// decoded from a byte string, so that `go test -fuzz` can mutate it, and
// [Seeds] gives fixed pseudo-random ones for the seeded runs inside
// `make test`. For each operation the runner checks:
//
//   - every store gives the same answer (or the same sentinel error), field
//     by field;
//   - the model gives that answer too, whatever came before: a clock that
//     stepped back, a count or burst changed for a key that holds state
//     (the model follows the rules the stores document for both). The
//     exceptions, each documented by its store: a Redis Cluster refund of a
//     full token bucket, which the cluster then finds stricter should the
//     clock go back ([Target].Split); and a bounded memory store's refusal
//     of an admission or check it has no room for ([Target].Refused), or
//     its error for debits it cannot hold ([Target].Full), where the clock
//     does not go back ([Options].NoClockBack): it would find again the
//     idle states the store evicted. A debit is never refused, and the
//     debit right after a check that passed, alone in its decision, never
//     fails for want of room;
//   - each Result on its own: Max is the limit's Max, Remaining in
//     [0, Max], RetryAfter 0 when allowed and Never exactly when the cost
//     is above Max, ResetAfter 0 only at a full allowance;
//   - RetryAfter is honest (the same cost passes at now+RetryAfter and not
//     1 µs before, if nothing else happens) and so is ResetAfter (the
//     allowance is full then, and not 1 µs before), asked of the model;
//   - a denied AllowAll consumed nothing: each of its results is what Peek
//     answers afterwards, on every store;
//   - the exact algorithms never admit above their limit: the fixed window
//     per window (the sliding window too), the sliding log in every interval
//     of one period, the token bucket burst plus one token per emission
//     interval in every interval; each request counted at the instant the
//     clock-back rules count it at.
//
// On a failure [Check] replays shorter sequences to find a short one that
// fails the same check, and prints it as Go source for a regression test.
package model
