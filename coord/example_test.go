package coord_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/shardkit/shard/coord"
	"github.com/shardkit/shard/coord/embedded"
)

// ExampleOpen keeps a placement in an in-process etcd: an operator creates the record, a
// mover records a migration under its epoch, and every process routes by the view.
func ExampleOpen() {
	dir, _ := os.MkdirTemp("", "coord-example-")
	defer os.RemoveAll(dir)
	endpoints, stop, err := embedded.Start(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()

	ctx := context.Background()
	c, err := coord.Open(ctx, endpoints, "/shard/example/", coord.Options{TTL: 3 * time.Second, Identity: "app-1"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	rev, _ := c.Update(ctx, 0, coord.Placement{Layout: coord.Layout{Strategy: "jump", Shards: 5}})
	_, err = c.Update(ctx, 0, coord.Placement{Layout: coord.Layout{Strategy: "jump", Shards: 6}})
	fmt.Println("second create refused:", errors.Is(err, coord.ErrConflict))

	m, _ := c.TryMover(ctx)
	p, rev, _ := c.Get(ctx)
	next := p.Clone()
	next.Migration = &coord.Migration{ID: "grow", Before: p.Layout, After: coord.Layout{Strategy: "jump", Shards: 10},
		Phase: coord.PhaseMoving, Epoch: m.Epoch()}
	rev, _ = m.Update(ctx, rev, next)

	v, _ := c.Wait(ctx, rev)
	p, _, err = v.Current()
	sh, _ := p.Layout.Sharder()
	to, _ := p.Migration.After.Sharder()
	fmt.Println(err, p.Writer, p.Migration.Phase, sh.Shards(), "->", to.Shards())
	// Output:
	// second create refused: true
	// <nil> app-1 moving 5 -> 10
}
