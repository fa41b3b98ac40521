package rebalance

import (
	"testing"

	"github.com/shardkit/shard"
	"github.com/stretchr/testify/require"
)

// A partition table that moves one partition places the keys of that partition elsewhere,
// whether or not a probe key falls in it: its fingerprint changes. Probing alone missed
// nearly every one-partition move of 16384 partitions, so a process routing by the table
// before the move was accepted as serving the one after it.
func TestFingerprintCoversPartitionTables(t *testing.T) {
	for _, paged := range []bool{false, true} {
		var s interface {
			shard.Sharder
			Table() []int
		}
		var move func(partition, to int) error
		if paged {
			p, err := shard.NewPagedPartitions(4, 1<<14, 1024)
			require.NoError(t, err)
			s = p
			move = func(part, to int) error {
				_, err := p.Move(shard.PartitionMove{Partition: part, From: p.Table()[part], To: to})
				return err
			}
		} else {
			p, err := shard.NewPartitions(4, 1<<14)
			require.NoError(t, err)
			s, move = p, p.Move
		}
		before := Fingerprint(s)
		moved := 0
		for part := range 64 {
			owner := s.Table()[part]
			require.NoError(t, move(part, (owner+1)%4))
			after := Fingerprint(s)
			require.NotEqual(t, before, after, "paged %v: partition %d moved, same fingerprint", paged, part)
			before = after
			moved++
		}
		require.Equal(t, 64, moved)
	}
}

// A co-location wrapper places the plain probe keys as the sharder it wraps: a mover
// configured with shard.ByPrefix(Jump) and an application with Jump shared a placement, and
// every shard served both while they put owners such as "tenant1-7" on different shards.
// Their fingerprints differ now, and a plain sharder's is what it was (golden values from
// before the flags).
func TestFingerprintTellsCoLocationApart(t *testing.T) {
	jump := func(n int) shard.Sharder {
		s, err := shard.NewJump(n)
		require.NoError(t, err)
		return s
	}
	modulo, err := shard.NewModulo(5)
	require.NoError(t, err)
	require.Equal(t, uint64(0xdaae5000c40ffec5), Fingerprint(jump(3)))
	require.Equal(t, uint64(0xc622874081957a98), Fingerprint(modulo))
	for _, n := range []int{2, 3, 10, 1000} {
		seen := map[uint64]string{}
		for name, s := range map[string]shard.Sharder{
			"plain":          jump(n),
			"prefix":         shard.ByPrefix(jump(n)),
			"tag":            shard.ByHashTag(jump(n)),
			"prefix and tag": shard.ByPrefix(shard.ByHashTag(jump(n))),
		} {
			fp := Fingerprint(s)
			require.Empty(t, seen[fp], "Jump(%d): %s and %s share a fingerprint", n, name, seen[fp])
			seen[fp] = name
		}
	}
	// A directory that routes by the prefix-ID owner places keys as ByPrefix does.
	require.Equal(t, Fingerprint(shard.ByPrefix(jump(3))), Fingerprint(shard.NewDirectory(jump(3), shard.PrefixOwner)))
	require.NotEqual(t, Fingerprint(shard.NewDirectory(jump(3), nil)), Fingerprint(shard.NewDirectory(jump(3), shard.PrefixOwner)))
	// One shard places every key alike, wrapped or not.
	require.Equal(t, Fingerprint(jump(1)), Fingerprint(shard.ByPrefix(jump(1))))
}
