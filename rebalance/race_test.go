//go:build race

package rebalance

// raceEnabled is true under the race detector, which slows the code 5 to 20 times: tests
// that repeat one check many times repeat it less there (see norace_test.go).
const raceEnabled = true
