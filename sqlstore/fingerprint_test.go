package sqlstore_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/rebalance"
)

// tenantOf is a directory's owner function for keys "tenant/...": the part before the first
// '/'. Every probe key of rebalance.Fingerprint ("rebalance/fingerprint/N") has the owner
// "rebalance".
func tenantOf(key string) string {
	before, _, _ := strings.Cut(key, "/")
	return before
}

// TestFingerprintProbesTheRule: the application routes tenants ("acme/...": the
// owner function takes the part before '/') through a Repin over a directory whose rule is
// Rendezvous(3). The operator switches the rule to Jump(3) with a plain Migration between the
// two directories, runs and finishes it. A process that still runs the old configuration
// (a Repin over the Rendezvous directory) is accepted by the placement check long after
// PlacementRecheck: the fingerprints of the two directories are equal, because every probe
// key has the same owner and both rules put that owner on one shard, and the count and the
// (empty) entries agree. Its writes go where Rendezvous places a tenant, where the served
// directory does not read them.
// That was the code before: a directory is probed through its rule now, and the stale
// process is refused.
func TestFingerprintProbesTheRule(t *testing.T) {
	forEngines(t, 3, func(t *testing.T, e *engine) {
		ctx := context.Background()
		admin := e.open(t, 2)
		rdv := func() shard.Sharder { s, _ := shard.NewRendezvous(3); return s }
		jump := func() shard.Sharder { s, _ := shard.NewJump(3); return s }
		oldDir := shard.NewDirectory(rdv(), tenantOf)
		newDir := shard.NewDirectory(jump(), tenantOf)
		w := newWorld(t, e, 3, 3)
		w.before, w.after = oldDir, newDir
		w.load(t, admin, span(1, 12), 3)
		var u string
		for _, x := range w.users {
			if oldDir.Locate(x) != newDir.Locate(x) {
				u = x
				break
			}
		}
		if u == "" {
			t.Fatal("setup: no tenant the switch moves")
		}
		// The stale process starts before the switch and serves requests.
		s := e.open(t, 2)
		stale, err := rebalance.NewRepin("app", shard.NewDirectory(rdv(), tenantOf), rdv(), s.store, rebalance.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := stale.Do(ctx, w.users[0], func(int) error { return nil }); err != nil {
			t.Fatal(err)
		}
		p := e.open(t, 2)
		sw, err := rebalance.New("switch", oldDir, newDir, p.store, rebalance.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := sw.Run(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		if err := sw.Finish(ctx, slices.Values(w.users)); err != nil {
			t.Fatal(err)
		}
		// Long after the recheck interval (a new Repin value asks at its first Do).
		stale2, _ := rebalance.NewRepin("app", shard.NewDirectory(rdv(), tenantOf), rdv(), s.store, rebalance.Options{})
		var wrote int
		err = stale2.Do(ctx, u, func(sh int) error { wrote = sh; return insertAcked(ctx, e, s, w, u, sh) })
		if errors.Is(err, rebalance.ErrPlacement) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		t.Errorf("a process routing by the old rule (Rendezvous) after the switch to Jump finished was accepted: tenant %s written to shard %d, the served directory places it on %d (fingerprints %016x and %016x)",
			u, wrote, newDir.Locate(u), rebalance.Fingerprint(oldDir), rebalance.Fingerprint(newDir))
		w.requireClean(t, admin, newDir)
	})
}
