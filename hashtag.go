package shard

import "strings"

// HashTag returns the part of key that Redis Cluster hashes: the bytes between the first '{'
// and the first '}' after it, when there is at least one byte between them, or else the
// whole key. So "{user1000}.following" and "{user1000}.followers" share the tag "user1000",
// while "foo{}{bar}" has no tag and is hashed whole. It never allocates.
func HashTag(key string) string {
	open := strings.IndexByte(key, '{')
	if open < 0 {
		return key
	}
	end := strings.IndexByte(key[open+1:], '}')
	if end <= 0 { // no '}', or "{}": Redis hashes the whole key
		return key
	}
	return key[open+1 : open+1+end]
}
