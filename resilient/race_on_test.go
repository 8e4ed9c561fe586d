//go:build race

package resilient_test

// raceDetector reports whether the tests run with the race detector, which
// makes every Redis round trip several times slower on a busy machine.
const raceDetector = true

// raceAllocNoise is the allocations of chance the race detector adds
// (see allocNoise).
const raceAllocNoise = 1
