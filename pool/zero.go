package pool

import "fmt"

// A pool's zero value has no table: its Locate returns "", AppendN appends nothing, Nodes
// returns none, and a change fails with the error zeroError makes. Lookups on it never
// panic, so that a pool declared but not yet built cannot take a process down.

// zeroError is the error of a change to the zero value of a strategy's pool.
func zeroError(strategy, how string) error {
	return fmt.Errorf("pool: zero %s: make one with %s: %w", strategy, how, ErrEmpty)
}
