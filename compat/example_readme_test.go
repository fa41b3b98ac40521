package compat_test

import (
	"fmt"
	"log"

	"github.com/shardkit/shard/compat"
)

// The README's second task: place keys exactly as nginx and twemproxy do, from the
// configuration text each one reads.
func Example_fromTheirConfig() {
	nginxConf := []byte(`
upstream cache {
    hash $arg_key consistent;
    server 10.0.0.1:11211;
    server 10.0.0.2:11211 weight=2;
}`)
	nutcrackerYML := []byte(`
cache:
  listen: 127.0.0.1:22121
  hash: md5
  distribution: ketama
  servers:
   - 10.0.0.1:6379:1
   - 10.0.0.2:6379:1
`)

	presets := map[string]compat.Preset{}
	for _, p := range compat.Presets() {
		presets[p.System] = p
	}
	nginx, err := presets["nginx"].New(nginxConf, "cache") // or os.ReadFile("nginx.conf")
	if err != nil {
		log.Fatal(err)
	}
	twemproxy, err := presets["twemproxy"].New(nutcrackerYML, "cache")
	if err != nil {
		log.Fatal(err)
	}
	for _, key := range []string{"user:1", "user:2", "user:3", "user:4"} {
		fmt.Println(key, nginx.Locate(key), twemproxy.Locate(key))
	}
	// Output:
	// user:1 10.0.0.1:11211 10.0.0.1:6379
	// user:2 10.0.0.1:11211 10.0.0.1:6379
	// user:3 10.0.0.2:11211 10.0.0.2:6379
	// user:4 10.0.0.2:11211 10.0.0.1:6379
}
