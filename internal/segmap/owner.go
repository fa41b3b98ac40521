package segmap

import (
	"errors"
	"fmt"
	"iter"
)

// What the directories of package shard and package pool share beyond the map: their
// sentinel error (each package exports this value under its own name), the owner rules and
// loading entries from a database's rows.

// ErrDirectory reports a directory entry that cannot be used.
var ErrDirectory = errors.New("invalid directory entry")

// MaxOwnerLen is the longest owner a directory pins, in bytes: owners are IDs, and the bound
// keeps a text line and a segment's keys small.
const MaxOwnerLen = 1 << 16

// CheckOwner returns an error wrapping ErrDirectory, without a package prefix, if owner
// cannot have an entry: it is longer than MaxOwnerLen, or ownerOf (nil: the key itself) gives
// it another owner, so that no key would ever find the entry.
func CheckOwner(owner string, ownerOf func(string) string) error {
	if len(owner) > MaxOwnerLen {
		return fmt.Errorf("owner %.64q...: %d bytes, longer than %d: %w", owner, len(owner), MaxOwnerLen, ErrDirectory)
	}
	if ownerOf != nil {
		if o := ownerOf(owner); o != owner {
			return fmt.Errorf("owner %.64q: that key's owner is %.64q: pin the owner: %w", owner, o, ErrDirectory)
		}
	}
	return nil
}

// BuildChecked returns the map of the entries, each value made by check from the given one.
// Errors have no package prefix: "entry I: " and check's error, or "owner %q given twice"
// wrapping ErrDirectory.
func BuildChecked[W any, V comparable](entries iter.Seq2[string, W], check func(owner string, w W) (V, error)) (*Map[V], error) {
	var bad error
	i := 0
	m, err := Build(func(yield func(string, V) bool) {
		for owner, w := range entries {
			var v V
			if v, bad = check(owner, w); bad != nil || !yield(owner, v) {
				return
			}
			i++
		}
	})
	switch {
	case bad != nil:
		return nil, fmt.Errorf("entry %d: %w", i, bad)
	case err != nil:
		return nil, fmt.Errorf("owner %v: %w", err, ErrDirectory)
	}
	return m, nil
}
