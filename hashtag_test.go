package shard

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The cases of the Redis Cluster specification's key hash tags section, and the ones the
// tag rule makes easy to get wrong.
func TestHashTag(t *testing.T) {
	for key, want := range map[string]string{
		"{user1000}.following": "user1000",
		"foo{}{bar}":           "foo{}{bar}",
		"foo{{bar}}zap":        "{bar",
		"foo{bar}{zap}":        "bar",
		"{}":                   "{}",
		"{":                    "{",
		"}{":                   "}{",
		"}{a}":                 "a",
		"":                     "",
		"plain":                "plain",
		"{\xff\x00}x":          "\xff\x00",
	} {
		assert.Equalf(t, want, HashTag(key), "HashTag(%q)", key)
	}
	assert.Zero(t, testing.AllocsPerRun(100, func() { _ = HashTag("{user1000}.following") }))
}
