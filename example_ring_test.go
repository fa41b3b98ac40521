package shard_test

import (
	"fmt"
	"strconv"

	"github.com/shardkit/shard"
)

func ExampleNewJedisRing() {
	// The same placement as Jedis's ShardedJedis over three unnamed shards with Hashing.MD5.
	r, err := shard.NewJedisRing(3)
	if err != nil {
		panic(err)
	}
	for _, key := range []string{"user:1000", "user:1001", "cart:42"} {
		fmt.Println(key, r.Locate(key))
	}
	// Output:
	// user:1000 2
	// user:1001 0
	// cart:42 2
}

func ExampleNewRing() {
	// 64 points per shard, each named after the server the shard stands for ("db-a#0", ...,
	// "db-c#63"); Hash is nil, so XXH64 places the points and the keys.
	servers := []string{"db-a", "db-b", "db-c"}
	r, err := shard.NewRing(len(servers), shard.RingOptions{
		Vnodes: 64,
		Name: func(i, vnode int) string {
			return servers[i] + "#" + strconv.Itoa(vnode)
		},
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Shards(), r.Points())
	for _, key := range []string{"user:1000", "user:1001", "cart:42"} {
		fmt.Println(key, servers[r.Locate(key)])
	}
	_, err = shard.NewRing(3, shard.RingOptions{Vnodes: -1})
	fmt.Println(err)
	// Output:
	// 3 192
	// user:1000 db-a
	// user:1001 db-c
	// cart:42 db-b
	// shard: ring: -1 vnodes: allowed range is [1, 4194304]: vnode count out of range
}

func ExampleNewMurmurRing() {
	r, err := shard.NewMurmurRing(4, 256)
	if err != nil {
		panic(err)
	}
	fmt.Println(r.Shards(), r.Points())
	before := r.Locate("user:1000")
	// Growing moves a key only to the new shard.
	if err := r.Resize(5); err != nil {
		panic(err)
	}
	after := r.Locate("user:1000")
	fmt.Println(before, after, after == before || after == 4)
	// Output:
	// 4 1024
	// 1 4 true
}

func ExampleMurmurToken() {
	// The tokens Cassandra's Murmur3Partitioner gives these partition keys; the empty key
	// has the minimum token.
	for _, key := range []string{"", "jsmith", "\xff\xfe"} {
		fmt.Printf("%q %d\n", key, shard.MurmurToken(key))
	}
	// Output:
	// "" -9223372036854775808
	// "jsmith" 3387803449176249109
	// "\xff\xfe" -2002833339314343643
}

func ExampleRing_Locate() {
	r, err := shard.NewRing(10, shard.RingOptions{Vnodes: 100})
	if err != nil {
		panic(err)
	}
	counts := make([]int, r.Shards())
	for i := range 10000 {
		counts[r.Locate(fmt.Sprintf("key-%d", i))]++
	}
	fmt.Println(counts)
	// Output:
	// [1033 1072 1197 977 971 924 854 1006 1032 934]
}
