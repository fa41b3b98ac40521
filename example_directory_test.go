package shard_test

import (
	"fmt"

	"github.com/shardkit/shard"
)

// A hot owner gets a shard of its own, and every record it owns (prefix IDs, the ID-features
// article [001]) follows it; everyone else stays where the rule puts them.
func ExampleNewDirectory() {
	jump, _ := shard.NewJump(10)
	d := shard.NewDirectory(jump, shard.PrefixOwner)
	keys := []string{"1", "1-A1", "1-A1-C7", "2-A5"}
	show := func() {
		for i, k := range keys {
			fmt.Printf("%s:%d", k, d.Locate(k))
			if i < len(keys)-1 {
				fmt.Print(" ")
			}
		}
		fmt.Println()
	}
	show()
	if err := d.Pin("1", 9); err != nil { // after moving user 1's rows to shard 9
		panic(err)
	}
	show()
	fmt.Println(d.Pin("1-A1", 9)) // a key is not an owner
	fmt.Println(d.Resize(9))      // shard 9 holds a pinned owner
	// Output:
	// 1:2 1-A1:2 1-A1-C7:2 2-A5:3
	// 1:9 1-A1:9 1-A1-C7:9 2-A5:3
	// shard: directory: pin owner "1-A1": that key's owner is "1": pin the owner: invalid directory entry
	// shard: directory: resize to 9 shards: owner "1" is pinned to shard 9 (owners pinned to shards >= 9: 1): unpin or repin them first: shard out of range
}

// The entries live in a database table, read with Load and written from Entries; a slice
// of rows stands in for the table here.
func ExampleDirectory_Load() {
	type row struct {
		owner string
		shard int
	}
	table := []row{{"user:7", 2}, {"user:42", 0}, {"user:1", 3}} // SELECT owner, shard FROM directory
	jump, _ := shard.NewJump(4)
	d := shard.NewDirectory(jump, nil)
	err := d.Load(func(yield func(string, int) bool) {
		for _, r := range table {
			if !yield(r.owner, r.shard) {
				return
			}
		}
	})
	if err != nil {
		panic(err)
	}
	d.Pin("user:9", 1)
	for owner, shard := range d.Entries() { // INSERT INTO directory (owner, shard) VALUES ...
		fmt.Printf("(%q, %d)\n", owner, shard)
	}
	text, _ := d.MarshalText()
	fmt.Print(string(text))
	// Output:
	// ("user:1", 3)
	// ("user:42", 0)
	// ("user:7", 2)
	// ("user:9", 1)
	// directory entries=4
	// "user:1" 3
	// "user:42" 0
	// "user:7" 2
	// "user:9" 1
}

// A migration needs the placement before and after a change of the directory. Clone over a
// second instance of the rule gives the after side without copying the entries; the owners
// to move are those whose shard differs, here only the one pinned.
func ExampleDirectory_Clone() {
	rule, _ := shard.NewJump(4)
	d := shard.NewDirectory(rule, nil)
	d.Pin("user:42", 0)

	sameRule, _ := shard.NewJump(4)
	after, _ := d.Clone(sameRule)
	after.Pin("user:7", 3) // drain user:7 to shard 3
	for _, owner := range []string{"user:7", "user:42", "user:1000"} {
		fmt.Printf("%s: shard %d -> %d\n", owner, d.Locate(owner), after.Locate(owner))
	}
	// ... copy user:7's rows from shard 1 to shard 3, then publish the entry:
	d.Pin("user:7", 3)
	fmt.Println(d.Locate("user:7"))
	// Output:
	// user:7: shard 1 -> 3
	// user:42: shard 0 -> 0
	// user:1000: shard 2 -> 2
	// 3
}
