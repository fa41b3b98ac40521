package compat

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardkit/shard/pool"
	"github.com/shardkit/shard/pool/bounded"
)

// TestHAProxyBoundedVectors replays the event sequences recorded from HAProxy 2.6 with
// hash-balance-factor (testdata/compat/haproxy/bounded, made by its gen.sh) on
// NewHAProxyBounded: every connection must go to the server HAProxy chose, every one of them.
func TestHAProxyBoundedVectors(t *testing.T) {
	dir := filepath.Join(vectorDir, "haproxy", "bounded")
	cfgs, err := filepath.Glob(filepath.Join(dir, "*.cfg"))
	require.NoError(t, err)
	require.NotEmpty(t, cfgs)
	ks := keys(t)
	for _, cfg := range cfgs {
		name := strings.TrimSuffix(filepath.Base(cfg), ".cfg")
		t.Run(name, func(t *testing.T) {
			text, err := os.ReadFile(cfg)
			require.NoError(t, err)
			b, err := ParseHAProxy(text, "")
			require.NoError(t, err)
			bal, err := NewHAProxyBounded(b)
			require.NoError(t, err)
			_, err = NewHAProxy(b)
			require.ErrorIs(t, err, ErrConfig, "a pool cannot reproduce hash-balance-factor")
			plain, _, err := newHAProxy(b) // the same ring without bounds, for counting walks
			require.NoError(t, err)

			f, err := os.Open(strings.TrimSuffix(cfg, ".cfg") + ".txt")
			require.NoError(t, err)
			defer f.Close()
			var servers []string
			leases := map[int]bounded.Lease{}
			opens, walked, full := 0, 0, 0
			sc := bufio.NewScanner(f)
			for line := 1; sc.Scan(); line++ {
				text := sc.Text()
				if rest, ok := strings.CutPrefix(text, "# servers: "); ok {
					for _, field := range strings.Fields(rest) {
						_, name, _ := strings.Cut(field, "=")
						servers = append(servers, name)
					}
					continue
				}
				if strings.HasPrefix(text, "#") || text == "" {
					continue
				}
				f := strings.Fields(text)
				n := make([]int, len(f)-1)
				for i := range n {
					n[i], err = strconv.Atoi(f[i+1])
					require.NoError(t, err, "line %d", line)
				}
				switch f[0] {
				case "o":
					conn, key, server := n[0], n[1], n[2]
					room := false
					for _, n := range bal.Nodes() {
						load, _ := bal.Load(n.Name)
						room = room || uint64(load) < bal.Capacity(n.Name, uint64(bal.Total()+1))
					}
					if !room {
						full++
					}
					l, err := bal.Acquire(ks[key])
					require.NoError(t, err)
					require.Equal(t, servers[server], l.Node(), "line %d: open %d of key %d", line, conn, key)
					leases[conn] = l
					opens++
					if plain.Locate(ks[key]) != l.Node() {
						walked++
					}
				case "c":
					conn, server := n[0], n[1]
					l, ok := leases[conn]
					require.True(t, ok, "line %d: close of %d, never opened", line, conn)
					require.Equal(t, servers[server], l.Node(), "line %d", line)
					require.NoError(t, l.Release(), "line %d", line)
					delete(leases, conn)
				case "d":
					require.NoError(t, bal.Remove(servers[n[0]]), "line %d", line)
					require.NoError(t, plain.Remove(servers[n[0]]), "line %d", line)
				case "e":
					w := 0
					for _, s := range b.Servers {
						if s.Name == servers[n[0]] {
							w = s.Weight
						}
					}
					require.NoError(t, bal.Add(pool.Node{Name: servers[n[0]], Weight: w}), "line %d", line)
					require.NoError(t, plain.Add(pool.Node{Name: servers[n[0]], Weight: w}), "line %d", line)
				case "w":
					require.NoError(t, bal.SetWeight(servers[n[0]], n[1]), "line %d", line)
					require.NoError(t, plain.SetWeight(servers[n[0]], n[1]), "line %d", line)
				default:
					t.Fatalf("line %d: unknown event %q", line, text)
				}
			}
			require.NoError(t, sc.Err())
			t.Logf("%d opens reproduced: %d past the key's first server, %d with every server full", opens, walked, full)
			require.NotZero(t, walked, "the sequence never exercises the bound")
		})
	}
}

// hash-balance-factor as cfgparse-listen.c reads it: atol, then 0 or above 100.
func TestHAProxyBalanceFactorParsed(t *testing.T) {
	section := func(lines string) []byte {
		return []byte("backend b\n    balance uri\n    hash-type consistent\n" + lines + "    server s1 127.0.0.1:1\n    server s2 127.0.0.1:2\n")
	}
	for factor, want := range map[string]string{
		"":           "'hash-balance-factor' expects an integer argument.",
		"100":        "'hash-balance-factor' must be 0 or greater than 100.",
		"-5":         "'hash-balance-factor' must be 0 or greater than 100.",
		"1x":         "'hash-balance-factor' must be 0 or greater than 100.",
		"3000000000": "'hash-balance-factor' must be 0 or greater than 100.", // negative as a C int
		"125":        "",
		"0":          "",
		"150percent": "",
		"4294967421": "", // 125 as a C int
	} {
		b, err := ParseHAProxy(section("    hash-balance-factor "+factor+"\n"), "b")
		if want != "" {
			require.ErrorIs(t, err, ErrConfig, factor)
			require.Contains(t, err.Error(), "line 4: "+want, factor)
			continue
		}
		require.NoError(t, err, factor)
		if b.BalanceFactor == 0 {
			_, err := NewHAProxy(b)
			require.NoError(t, err, "factor 0 is plain consistent hashing")
			_, err = NewHAProxyBounded(b)
			require.ErrorIs(t, err, ErrConfig)
			continue
		}
		_, err = NewHAProxy(b)
		require.ErrorIs(t, err, ErrConfig, factor)
		require.Contains(t, err.Error(), "NewHAProxyBounded")
		_, err = NewHAProxyBounded(b)
		require.NoError(t, err, factor)
	}
	// Under map-based HAProxy ignores it, and so does NewHAProxy.
	b, err := ParseHAProxy([]byte("backend b\n    balance uri\n    hash-balance-factor 150\n    server s1 127.0.0.1:1\n"), "b")
	require.NoError(t, err)
	_, err = NewHAProxy(b)
	require.NoError(t, err)
	_, err = NewHAProxyBounded(b)
	require.ErrorIs(t, err, ErrConfig)
	require.Contains(t, err.Error(), "needs hash-type consistent")
}
