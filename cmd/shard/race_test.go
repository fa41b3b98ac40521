//go:build race

package main

// raceEnabled is true under the race detector, whose instrumentation allocates besides the
// code: byte budgets are looser there (see norace_test.go).
const raceEnabled = true
