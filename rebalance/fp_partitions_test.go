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
