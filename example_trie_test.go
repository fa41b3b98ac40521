package shard_test

import (
	"fmt"

	"github.com/shardkit/shard"
)

func ExampleNewTrie() {
	t, err := shard.NewTrie(3)
	if err != nil {
		panic(err)
	}
	// Three shards: the root split into 0 and 1, then 0 split into 00 and 01.
	for _, l := range t.Leaves() {
		fmt.Printf("hash bits %0*b... -> shard %d\n", l.Depth, l.Path, l.Shard)
	}
	fmt.Println(t.Locate("user:1000"), t.Locate("user:1001"))
	// Output:
	// hash bits 00... -> shard 0
	// hash bits 01... -> shard 2
	// hash bits 1... -> shard 1
	// 2 1
}

func ExampleTrie_Split() {
	t, err := shard.NewTrie(2)
	if err != nil {
		panic(err)
	}
	// Shard 1 is full: split its leaf. About half of its keys, those whose next hash bit is
	// 1, move to the new shard 2; no other key moves.
	n, err := t.Split(1)
	if err != nil {
		panic(err)
	}
	fmt.Println("new shard", n, "of", t.Shards())
	text, _ := t.MarshalText()
	fmt.Print(string(text))

	// Shard 2's sibling is a leaf, so it can merge back.
	fmt.Println(t.Merge(2))
	// Shard 0's sibling is now a subtree again: merging it would remove other shards.
	_, _ = t.Split(1)
	fmt.Println(t.Merge(0))
	// Output:
	// new shard 2 of 3
	// 0 0
	// 10 1
	// 11 2
	// <nil>
	// shard: trie: cannot merge: shard 0 (leaf 0) has as sibling the subtree 1 of shards [1 2], not a leaf; merging would collapse the root with its 3 leaves into one leaf, removing 2 shards: sibling is a subtree
}

func ExampleTrie_MarshalText() {
	t, err := shard.NewTrie(5)
	if err != nil {
		panic(err)
	}
	text, err := t.MarshalText()
	if err != nil {
		panic(err)
	}
	fmt.Print(string(text))

	// Another process routes by the same tree.
	var other shard.Trie
	if err := other.UnmarshalText(text); err != nil {
		panic(err)
	}
	fmt.Println(other.Shards(), other.Locate("user:1000") == t.Locate("user:1000"))

	// A shape that leaves prefix 01 uncovered is rejected.
	fmt.Println(other.UnmarshalText([]byte("00 0\n1 1\n")))
	// Output:
	// 000 0
	// 001 4
	// 01 2
	// 10 1
	// 11 3
	// 5 true
	// shard: trie: no leaf covers prefix 01: bad trie shape
}
