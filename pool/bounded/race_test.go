//go:build race

package bounded

// raceEnabled is true under the race detector, whose sync.Pool drops items at random.
const raceEnabled = true
