package shard_test

import (
	"fmt"
	"log"
	"slices"
	"strconv"
	"strings"

	"github.com/shardkit/shard"
)

// The ID-features article's [001] scenario: users write articles, articles get comments, and a
// user's records should share a partition. Routing integer IDs by id % N keeps them together
// only until N changes; prefix IDs keep them together through every change.
func ExampleByPrefix() {
	m, _ := shard.NewModulo(4)
	byOwner := shard.ByPrefix(m)

	// Each partition numbers each table like IDENTITY(k, 4): every ID of partition k is
	// k mod 4, so id % 4 finds it.
	tables := func() (seq [4]*shard.IDAllocator) {
		for k := range seq {
			seq[k], _ = shard.NewIDAllocator(k, 4)
		}
		return seq
	}
	users, articles, comments := tables(), tables(), tables()

	type record struct {
		id  uint64 // the row's integer ID, for id % N
		key string // its prefix ID, for ByPrefix
	}
	var owners [][]record
	for _, k := range []int{1, 2, 3, 0} { // a new user may go anywhere
		uid, _ := users[k].Next()
		user := record{uid, strconv.FormatUint(uid, 10)}
		recs := []record{user}
		for range 4 {
			// An article goes to its author's partition, a comment to its article's.
			aid, _ := articles[k].Next()
			akey, _ := shard.PrefixID(user.key, "A"+strconv.FormatUint(aid, 10))
			cid, _ := comments[k].Next()
			ckey, _ := shard.PrefixID(akey, "C"+strconv.FormatUint(cid, 10))
			recs = append(recs, record{aid, akey}, record{cid, ckey})
		}
		owners = append(owners, recs)
	}

	var keys []string
	for _, r := range owners[0] {
		keys = append(keys, r.key)
	}
	fmt.Println("user 1's records:", strings.Join(keys, " "))

	// ByPrefix hashes the owner's ID, so a user's partition differs from uid % N; what
	// matters is that there is one.
	show := func() {
		fmt.Printf("%d partitions\n", m.Shards())
		for _, recs := range owners {
			var byID, byPrefix []int
			for _, r := range recs {
				byID = append(byID, m.LocateID(r.id))
				byPrefix = append(byPrefix, byOwner.Locate(r.key))
			}
			slices.Sort(byID)
			slices.Sort(byPrefix)
			fmt.Printf("  user %s: id %% N on %v, prefix ID on %v\n",
				recs[0].key, slices.Compact(byID), slices.Compact(byPrefix))
		}
	}
	show()
	_ = m.Resize(5)
	show()
	_ = m.Resize(8) // doubling does not help either
	show()
	// Output:
	// user 1's records: 1 1-A1 1-A1-C1 1-A5 1-A5-C5 1-A9 1-A9-C9 1-A13 1-A13-C13
	// 4 partitions
	//   user 1: id % N on [1], prefix ID on [0]
	//   user 2: id % N on [2], prefix ID on [3]
	//   user 3: id % N on [3], prefix ID on [0]
	//   user 4: id % N on [0], prefix ID on [1]
	// 5 partitions
	//   user 1: id % N on [0 1 3 4], prefix ID on [0]
	//   user 2: id % N on [0 1 2 4], prefix ID on [1]
	//   user 3: id % N on [0 1 2 3], prefix ID on [1]
	//   user 4: id % N on [1 2 3 4], prefix ID on [4]
	// 8 partitions
	//   user 1: id % N on [1 5], prefix ID on [4]
	//   user 2: id % N on [2 6], prefix ID on [3]
	//   user 3: id % N on [3 7], prefix ID on [4]
	//   user 4: id % N on [0 4], prefix ID on [1]
}

// Four partitions numbered as the ID-features article [001] numbers them.
func ExampleNewIDAllocator() {
	for k := range 4 {
		a, _ := shard.NewIDAllocator(k, 4)
		var ids []uint64
		for range 4 {
			id, _ := a.Next()
			ids = append(ids, id)
		}
		fmt.Printf("partition %d: %v\n", k, ids)
	}
	// Output:
	// partition 0: [4 8 12 16]
	// partition 1: [1 5 9 13]
	// partition 2: [2 6 10 14]
	// partition 3: [3 7 11 15]
}

// After a restart, partition 3 of 4 continues from the largest ID its table holds; an ID of
// another partition is refused.
func ExampleResumeIDAllocator() {
	a, err := shard.ResumeIDAllocator(3, 4, 15) // SELECT MAX(id) said 15
	if err != nil {
		log.Fatal(err)
	}
	id, _ := a.Next()
	fmt.Println("after 15:", id)

	_, err = shard.ResumeIDAllocator(3, 4, 16)
	fmt.Println(err)
	// Output:
	// after 15: 19
	// shard: id allocator: last ID 16 is not an ID of partition 3 of 4 (want ID % 4 == 3, ID <= 9223372036854775807): ID not in partition
}

func ExampleByHashTag() {
	m, _ := shard.NewModulo(8)
	s := shard.ByHashTag(m)
	for _, key := range []string{"{user1000}.following", "{user1000}.followers", "user1000.following"} {
		fmt.Printf("%s -> %d\n", key, s.Locate(key))
	}
	_ = s.Resize(5)
	fmt.Println(s.Locate("{user1000}.following") == s.Locate("{user1000}.followers"))
	// Output:
	// {user1000}.following -> 7
	// {user1000}.followers -> 7
	// user1000.following -> 5
	// true
}
