package shard

// Leaf is one leaf of a Trie: every key whose 64-bit hash begins with the Depth bits of Path
// belongs to Shard. Path holds those bits right-aligned, so Path < 1<<Depth; the root leaf of
// a one-shard trie has Depth 0 and Path 0.
type Leaf struct {
	Path  uint64
	Depth int
	Shard int
}
