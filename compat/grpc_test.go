package compat

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/cespare/xxhash/v2"
	"github.com/stretchr/testify/require"

	"github.com/shardkit/shard/pool"
)

// Every vector made with grpc-go's ring_hash_experimental (testdata/compat/grpc): 24
// configurations, each with the 787 keys of keys.txt that gRPC carries in a header.
func TestGRPCVectors(t *testing.T) {
	files, placements := checkVectorsIn(t, "grpc", "grpc", "json", nil)
	require.Equal(t, 24, files)
	require.Equal(t, 24*787, placements)
	require.Equal(t, placements, presetOf(t, "grpc").Checked, "the preset's Checked")
}

func TestGRPCRefused(t *testing.T) {
	require.Equal(t, 7, checkRefusedIn(t, "grpc", "grpc", "json"))
}

func FuzzGRPC(f *testing.F) { fuzzPreset(f, "grpc", "json") }

// grpcRingSlow builds grpc-go's ring the obvious way, the loop of ring.go:188 as written,
// and returns the owner of key by a linear scan for the first entry at or after its hash.
func grpcRingSlow(cfg GRPCRingHash, key string) string {
	r := &grpcRules{minSize: cmp.Or(cfg.MinRingSize, 1024), maxSize: cmp.Or(cfg.MaxRingSize, 4096)}
	r.minSize, r.maxSize = min(r.minSize, 4096), min(r.maxSize, 4096)
	l := &serverList{}
	for _, e := range cfg.Endpoints {
		l.servers = append(l.servers, grpcServer(e.Address, e.Weight, e.HashKey))
	}
	es, minWeight, _ := r.entries(l)
	scale := min(float64(r.maxSize), math.Ceil(minWeight*float64(r.minSize))/minWeight)
	type entry struct {
		h    uint64
		addr string
	}
	var ring []entry
	var currentHashes, targetHashes float64
	for _, e := range es {
		targetHashes += scale * e.weight
		for idx := 0; currentHashes < targetHashes; idx++ {
			ring = append(ring, entry{xxhash.Sum64String(fmt.Sprintf("%s_%d", e.key, idx)), l.servers[e.list].name})
			currentHashes++
		}
	}
	h := xxhash.Sum64String(key)
	best := -1
	for i, e := range ring {
		if e.h >= h && (best < 0 || e.h < ring[best].h) {
			best = i
		}
	}
	if best < 0 {
		for i, e := range ring {
			if best < 0 || e.h < ring[best].h {
				best = i
			}
		}
	}
	return ring[best].addr
}

// The preset agrees with the slow ring on random memberships, weights and sizes, and after
// changes made through the Pool interface.
func TestGRPCAgreesWithSlowRing(t *testing.T) {
	ks := keys(t)[:300]
	for n := 1; n <= 12; n++ {
		cfg := GRPCRingHash{RequestHashHeader: "x-k", MinRingSize: uint64(n * 37), MaxRingSize: uint64(n*37 + n*n*50)}
		for i := range n {
			cfg.Endpoints = append(cfg.Endpoints, GRPCEndpoint{Address: fmt.Sprintf("10.0.%d.%d:443", n, i), Weight: uint32((i * 7919) % 13)})
		}
		p, err := NewGRPC(cfg)
		require.NoError(t, err)
		for _, k := range ks {
			require.Equal(t, grpcRingSlow(cfg, k), p.Locate(k), "n=%d key %q", n, k)
		}
		// Add and SetWeight rebuild the ring as a new endpoint list would.
		require.NoError(t, p.Add(pool.Node{Name: "10.9.9.9:443", Weight: 3}))
		require.NoError(t, p.SetWeight(cfg.Endpoints[0].Address, 5))
		cfg.Endpoints = append(cfg.Endpoints, GRPCEndpoint{Address: "10.9.9.9:443", Weight: 3})
		cfg.Endpoints[0].Weight = 5
		for _, k := range ks {
			require.Equal(t, grpcRingSlow(cfg, k), p.Locate(k), "n=%d after changes, key %q", n, k)
		}
		checkZeroAllocs(t, p)
	}
}

func TestGRPCErrors(t *testing.T) {
	ep := `"endpoints": [{"address": "a:1"}, {"address": "b:1"}]`
	lb := `"loadBalancingConfig": [{"ring_hash_experimental": {"requestHashHeader": "x-k"}}]`
	for _, c := range []struct{ text, want string }{
		{`[]`, "line 1: want a JSON object"},
		{`{` + ep + `}`, "no loadBalancingConfig"},
		{`{"loadBalancingConfig": [{"round_robin": {}}], ` + ep + `}`, `the first policy is "round_robin"`},
		{`{"loadBalancingConfig": [{"ring_hash_experimental": {}, "x": {}}], ` + ep + `}`, "exactly one policy"},
		{`{"loadBalancingConfig": [{"ring_hash_experimental": {"minringsize": 10, "requestHashHeader": "x"}}], ` + ep + `}`, `unknown member "minringsize"`},
		{`{"loadBalancingConfig": [{"ring_hash_experimental": {"minRingSize": -1, "requestHashHeader": "x"}}], ` + ep + `}`, "minRingSize: -1 is not an integer"},
		{`{"loadBalancingConfig": [{"ring_hash_experimental": {"minRingSize": 1e3, "requestHashHeader": "x"}}], ` + ep + `}`, "minRingSize: 1e3 is not an integer"},
		{`{"loadBalancingConfig": [{"ring_hash_experimental": {"requestHashHeader": ":path"}}], ` + ep + `}`, "pseudo-header"},
		{`{"loadBalancingConfig": [{"ring_hash_experimental": {"requestHashHeader": 7}}], ` + ep + `}`, "must be a string"},
		{`{` + lb + `, ` + lb + `, ` + ep + `}`, `"loadBalancingConfig" is given twice`},
		{`{` + lb + `, "endpoints": [{"address": "a:1"}, {"address": "a:1"}]}`, `address "a:1" is listed twice`},
		{`{` + lb + `, "endpoints": [{"address": "a:1", "hashKey": "k"}, {"address": "b:1", "hashKey": "k"}]}`, `same hash key "k"`},
		{`{` + lb + `, "endpoints": [{"address": "a:1", "hashKey": "b:1"}, {"address": "b:1"}]}`, `same hash key "b:1"`},
		{`{` + lb + `, "endpoints": [{"address": "a:1", "weight": 4294967296}]}`, "weight: 4294967296 is not an integer in [0, 4294967295]"},
		{`{` + lb + `, "endpoints": [{"address": "a:1", "weight": 4294967295}, {"address": "b:1", "weight": 1}]}`, "wraps to 0"},
		{`{` + lb + `, "endpoints": [{"address": ""}]}`, "needs an address"},
		{`{` + lb + `, "endpoints": [{"address": "a:1", "port": 1}]}`, `unknown member "port"`},
		{`{` + lb + `, "endpoints": {}}`, "must be an array"},
		{`{` + lb + `}`, `no "endpoints"`},
		{`{` + lb + `, "ringHashCap": "8M", ` + ep + `}`, "ringHashCap: a string, not a number"},
		{`{"loadBalancingConfig": [{"ring_hash_experimental": {"requestHashHeader": "x", "minRingSize": 8000000, "maxRingSize": 8000000}}], "ringHashCap": 8388608, ` + ep + `}`, "a pool holds at most 4194304"},
		{`{"loadBalancingPolicy": "round_robin", ` + ep + `}`, "reproduces ring_hash_experimental only"},
		{`{"services": 1, ` + ep + `}`, `unknown member "services"`},
	} {
		_, err := presetOf(t, "grpc").New([]byte(c.text), "")
		require.ErrorIs(t, err, ErrConfig, c.text)
		var ce *ConfigError
		require.True(t, errors.As(err, &ce))
		require.Contains(t, err.Error(), c.want, c.text)
		require.True(t, strings.HasPrefix(err.Error(), "compat: grpc: line "), err.Error())
	}
	// The typed constructor names the field.
	_, err := NewGRPC(GRPCRingHash{RequestHashHeader: "x", Endpoints: []GRPCEndpoint{{Address: "a"}}, MinRingSize: 9000000})
	require.ErrorIs(t, err, ErrConfig)
	require.Contains(t, err.Error(), "compat: grpc: ring size: ")
	_, err = presetOf(t, "grpc").New([]byte(`{}`), "other")
	require.ErrorIs(t, err, ErrConfig)
}

// A change the ring cannot take leaves the pool as it was.
func TestGRPCChangesRefused(t *testing.T) {
	p, err := NewGRPC(GRPCRingHash{RequestHashHeader: "x", Endpoints: []GRPCEndpoint{{Address: "a:1", HashKey: "k"}, {Address: "b:1"}}})
	require.NoError(t, err)
	before := owners(p, keys(t)[:100])
	require.ErrorIs(t, p.Add(pool.Node{Name: "k"}), ErrConfig) // its hash key is a:1's
	require.ErrorIs(t, p.Add(pool.Node{Name: "b:1"}), pool.ErrNode)
	require.ErrorIs(t, p.Remove("a:1", "b:1"), pool.ErrEmpty)
	require.Equal(t, before, owners(p, keys(t)[:100]))
	require.NoError(t, p.Remove("b:1"))
	require.Equal(t, "a:1", p.Locate("anything"))
}
