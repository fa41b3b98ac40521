package compat

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardkit/shard/pool"
)

func TestSpymemcachedVectors(t *testing.T) {
	files, placements := checkVectorsIn(t, "spymemcached", "spymemcached", "conf", func(name string) bool { return strings.HasPrefix(name, "accepted-") })
	require.Equal(t, 67, files) // 14 of them with servers as host/ip pairs (pairs-*)
	require.Equal(t, 134000, placements)
	require.Equal(t, placements, presetOf(t, "spymemcached").Checked, "the preset's Checked")
}

func TestSpymemcachedRefused(t *testing.T) {
	require.Equal(t, 8, checkRefusedIn(t, "spymemcached", "spymemcached", "conf"))
}

// The odd configurations spymemcached accepts, and the node its getPrimary("user:1") gave.
func TestSpymemcachedAccepted(t *testing.T) {
	for file, want := range map[string]string{
		"accepted-ipv6-bare":        "::1:24101",
		"accepted-ipv6-bracketed":   "[::1]:24101",
		"accepted-separators":       "127.0.0.1:24102",
		"accepted-weights-negative": "127.0.0.1:24102",
	} {
		config, err := os.ReadFile(filepath.Join(vectorDir, "spymemcached", file+".conf"))
		require.NoError(t, err)
		transcript, err := os.ReadFile(filepath.Join(vectorDir, "spymemcached", file+".txt"))
		require.NoError(t, err)
		require.Contains(t, string(transcript), "getPrimary(\"user:1\")\n  -> /")
		p, err := presetOf(t, "spymemcached").New(config, "")
		require.NoError(t, err, file)
		require.Equal(t, want, p.Locate("user:1"), file)
	}
}

// Host/ip pairs that InetAddress.getByAddress and InetSocketAddress would refuse, or that name
// no address, are refused at their line; so is a list that gives both servers and addresses.
func TestSpymemcachedPairsRefused(t *testing.T) {
	for _, c := range []struct {
		text string
		line int
	}{
		{"locator=CONSISTENT\naddresses=cache-a:11211\n", 2},                 // no '/'
		{"locator=CONSISTENT\naddresses=cache-a/10.0.0.1\n", 2},              // no port
		{"locator=CONSISTENT\naddresses=cache-a/cache-a.example:11211\n", 2}, // a name, not an address
		{"locator=CONSISTENT\naddresses=cache-a/10.0.0.1:70000\n", 2},        // port out of range
		{"locator=CONSISTENT\naddresses=cache-a/10.0.0.1:+x\n", 2},           // NumberFormatException
		{"locator=CONSISTENT\naddresses= , \n", 2},                           // empty
		{"servers=10.0.0.1:11211\naddresses=cache-a/10.0.0.1:11211\n", 2},    // both
	} {
		_, err := presetOf(t, "spymemcached").New([]byte(c.text), "")
		require.ErrorIsf(t, err, ErrConfig, "%q", c.text)
		var ce *ConfigError
		require.Truef(t, errors.As(err, &ce), "%q: %T", c.text, err)
		require.Equalf(t, c.line, ce.Line, "%q: %v", c.text, err)
	}
	// Add takes a node written as the list is written: a pair here.
	p, err := presetOf(t, "spymemcached").New([]byte("locator=CONSISTENT\nhash=KETAMA_HASH\naddresses=cache-a/10.0.0.1:11211 cache-b/10.0.0.2:11211\n"), "")
	require.NoError(t, err)
	require.NoError(t, p.Add(pool.Node{Name: "cache-c/10.0.0.3:11211", Weight: 1}))
	require.ErrorIs(t, p.Add(pool.Node{Name: "10.0.0.4:11211", Weight: 1}), ErrConfig)
}
