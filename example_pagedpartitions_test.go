package shard_test

import (
	"fmt"

	"github.com/shardkit/shard"
)

func ExampleNewPagedPartitions() {
	// 2^20 partitions in 1024 pages of 1024, among 10 shards.
	p, err := shard.NewPagedPartitions(10, 1<<20, 1024)
	if err != nil {
		panic(err)
	}
	for _, key := range []string{"user:1000", "user:1001"} {
		part := p.Partition(key)
		fmt.Printf("%s: partition %d on page %d, shard %d\n", key, part, part/p.PageSize(), p.Locate(key))
	}
	// Growing to 11 shards moves 95325 partitions but rewrites only the pages that hold them.
	changed, err := p.ResizePages(11)
	if err != nil {
		panic(err)
	}
	fmt.Printf("%d of %d pages changed, the first %d\n", len(changed), p.NumPages(), changed[0])
	text, _ := p.MarshalPages(changed[0])
	fmt.Print(string(text))
	// Output:
	// user:1000: partition 295786 on page 288, shard 2
	// user:1001: partition 548010 on page 535, shard 5
	// 102 of 1024 pages changed, the first 93
	// hash=xxh64 partitions=1048576 pagesize=1024 shards=11
	// page=93 version=2
	// 0-93 0
	// 94-1023 10
}

// A router that holds only the pages it needs loads a page on a miss, and later applies
// the pages a resize changed, all at once.
func ExamplePagedPartitions_LoadPages() {
	central, _ := shard.NewPagedPartitions(10, 1<<20, 1024) // what the central store holds
	var router shard.PagedPartitions                        // holds no page yet
	key := "user:1000"
	if _, ok := router.Lookup(key); !ok {
		page := central.Partition(key) / central.PageSize()
		text, _ := central.MarshalPages(page) // fetched from the central store
		if err := router.LoadPages(text); err != nil {
			panic(err)
		}
	}
	s, ok := router.Lookup(key)
	fmt.Println(s, ok, router.Shards())

	changed, _ := central.ResizePages(11)
	text, _ := central.MarshalPages(changed...)
	fmt.Println(router.LoadPages(text))
	fmt.Println(router.LoadPages(text)) // again: harmless
	old, _ := shard.NewPagedPartitions(10, 1<<20, 1024)
	stale, _ := old.MarshalPages(changed[0])
	fmt.Println(router.LoadPages(stale)) // a page from before the resize
	// Output:
	// 2 true 0
	// <nil>
	// <nil>
	// shard: paged partitions: line 2: page 93: version 1 is older than the loaded version 2: stale partition page
}
