package compat_test

import (
	"errors"
	"fmt"

	"github.com/shardkit/shard/compat"
)

// A grpc-go client with ring_hash over three weighted endpoints: the endpoint an RPC goes to
// when its x-user header holds the key.
func ExampleNewGRPC() {
	p, err := compat.NewGRPC(compat.GRPCRingHash{
		RequestHashHeader: "x-user",
		Endpoints: []compat.GRPCEndpoint{
			{Address: "10.0.0.1:50051", Weight: 2},
			{Address: "10.0.0.2:50051"},
			{Address: "10.0.0.3:50051", HashKey: "backend-c"},
		},
	})
	if err != nil {
		panic(err)
	}
	for _, user := range []string{"alice", "bob", "carol"} {
		fmt.Println(user, p.Locate(user))
	}
	// Output:
	// alice 10.0.0.3:50051
	// bob 10.0.0.1:50051
	// carol 10.0.0.3:50051
}

// A keyspace of four shards under the hash vindex: the shard of a row by its id, and the
// keyspace id on the way.
func ExampleNewVitess() {
	k, err := compat.NewVitess(compat.Vitess{Vindex: "hash", Shards: []string{"-40", "40-80", "80-c0", "c0-"}})
	if err != nil {
		panic(err)
	}
	for _, id := range []string{"1", "42", "-7"} {
		ksid, _ := k.KeyspaceID(nil, id)
		fmt.Printf("%s %x %s\n", id, ksid, k.Locate(id))
	}
	n, _ := compat.NewVitess(compat.Vitess{Vindex: "numeric", Shards: []string{"-80", "80-"}})
	_, err = n.Shard("-7")
	fmt.Println(errors.Is(err, compat.ErrNoKeyspaceID))
	// Output:
	// 1 166b40b44aba4bd6 -40
	// 42 61f0f4f610d0a79a 40-80
	// -7 da6789849f083919 c0-
	// true
}
