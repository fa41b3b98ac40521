package compat

import (
	"fmt"

	"github.com/shardkit/shard/internal/ring"
	"github.com/shardkit/shard/pool"
)

// maxPoints is the most points or slots a pool of this module holds (pool.Ring's and
// pool.Modula's limit).
const maxPoints = ring.MaxPoints

// limitErr refuses a configuration whose points or slots, counted up to a line, exceed what a
// pool holds; it wraps pool.ErrLimit besides ErrConfig.
func limitErr(system string, line int, what string, count int) error {
	return &ConfigError{System: system, Line: line, Msg: fmt.Sprintf("%d %s or more: a pool holds at most %d", count, what, maxPoints), Err: pool.ErrLimit}
}

// tooManyPoints is what a point generator returns for a membership of more points than a ring
// holds, without making them: a slice one longer than the limit, so that the change fails with
// pool.ErrLimit. Its memory is never written, so the operating system backs little of it.
func tooManyPoints() []pool.RingPoint { return make([]pool.RingPoint, maxPoints+1) }

// tooManySlots is tooManyPoints for a modulo table.
func tooManySlots() []int32 { return make([]int32, maxPoints+1) }
