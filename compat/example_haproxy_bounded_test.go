package compat_test

import (
	"fmt"

	"github.com/shardkit/shard/compat"
)

// Connections for one hot URI, placed as HAProxy's hash-balance-factor places them: each
// new connection goes to the first server on the ring, from the URI's point, whose
// connections are fewer than its slots.
func ExampleNewHAProxyBounded() {
	b, err := compat.ParseHAProxy([]byte(`
backend video
    balance uri
    hash-type consistent
    hash-balance-factor 125
    server s1 10.0.0.1:80
    server s2 10.0.0.2:80
    server s3 10.0.0.3:80
`), "video")
	if err != nil {
		panic(err)
	}
	bal, err := compat.NewHAProxyBounded(b)
	if err != nil {
		panic(err)
	}
	var servers []string
	for range 6 {
		l, err := bal.Acquire("/video/42/segment-7.ts")
		if err != nil {
			panic(err)
		}
		servers = append(servers, l.Node()) // l.Release() when the connection ends
	}
	fmt.Println(servers)
	// Output:
	// [s1 s3 s3 s2 s1 s3]
}
