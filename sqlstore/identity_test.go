package sqlstore_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/shardkit/shard/sqlstore"
)

// TestShardOrder: a Store over shards listed in another order than before (two DSNs swapped
// in a configuration), or with one database listed twice, would send every access and move
// of some owners to a database that holds none of their rows: a move would serve an owner
// from a shard without its rows. Init refuses both, naming the shard; shards appended to the
// list, or dropped from its end, start; so does a new order once the recorded one is deleted.
func TestShardOrder(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		first := *e
		first.shards = e.shards[:2]
		first.open(t, 1).close() // positions 0 and 1 recorded
		for _, c := range []struct {
			name   string
			shards []string
			want   string // "" if Init succeeds
		}{
			{"swapped", []string{e.shards[1], e.shards[0], e.shards[2]}, "not the one recorded at position 0"},
			{"twice", []string{e.shards[0], e.shards[1], e.shards[0]}, "are one database"},
			{"new at the end", e.shards, ""},
			{"swapped at the end", []string{e.shards[0], e.shards[2], e.shards[1]}, "the database recorded at position 2"},
			{"last dropped", e.shards[:2], ""},
		} {
			f := *e
			f.shards = c.shards
			p, err := f.openErr(1)
			if p != nil {
				p.close()
			}
			switch {
			case c.want == "" && err != nil:
				t.Errorf("%s: Init: %v", c.name, err)
			case c.want != "" && (!errors.Is(err, sqlstore.ErrShardOrder) || !strings.Contains(err.Error(), c.want)):
				t.Errorf("%s: Init: %v, want ErrShardOrder: ...%s...", c.name, err, c.want)
			}
		}
		admin := e.open(t, 1)
		mustExec(t, admin.ctl, "DELETE FROM rebalance_shards")
		f := *e
		f.shards = slices.Clone(e.shards)
		slices.Reverse(f.shards)
		f.open(t, 1)
	})
}
