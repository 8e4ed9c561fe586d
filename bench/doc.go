// Package bench compares redlimit with other rate limiting libraries.
//
// It is a module of its own, so that the competitors it imports never reach
// redlimit's users. Everything is in _test.go files; run ./run.sh, which
// writes results.txt. docs/BENCHMARKS.md in the main module holds the
// figures of the last run and explains them.
package bench
