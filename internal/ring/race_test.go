//go:build race

package ring

// raceEnabled is true under the race detector, which slows the code 5 to 20 times: the
// largest tables are left to the runs without it (see norace_test.go).
const raceEnabled = true
