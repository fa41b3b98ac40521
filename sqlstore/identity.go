package sqlstore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/shardkit/shard/rebalance"
)

// Each shard database holds an identity of its own (rebalance_identity: one random ID, made
// by the first Init), and the control database records which identity is at which position
// of the shard list (rebalance_shards). Init refuses a list that has one database twice, or
// a database at another position than before: the shards listed in another order (a
// configuration edited, two DSNs swapped) would have every access and move go to the wrong
// database, and a move would serve an owner from a shard that holds none of its rows.
// Shards appended to the list, or dropped from its end, are new positions or no longer
// listed; to list the shards anew (a shard retired from the middle), delete the rows of
// rebalance_shards in the control database.

//
// Each shard also records the identity of the control database it was first listed with
// (rebalance_control), and Init refuses another: the control database issues the movers'
// tokens and holds their leases, so two processes configured with two control databases
// (a DSN mistyped) would each issue token 1 to a mover of the same migration, neither
// seeing the other's lease, and every shard would take the writes of both. A control
// database moved whole (dump and restore) keeps its identity (one restored from an older
// backup is told by the shards' newer tokens: ErrControlBehind); to start over with a new
// one, delete the row of rebalance_control on every shard.

// ErrShardOrder reports a shard list that does not match the databases: one database listed
// twice, or at another position than the control database recorded.
var ErrShardOrder = errors.New("shards listed in another order than before")

// ErrOtherControl reports a shard that was listed with another control database than the
// Store's.
var ErrOtherControl = errors.New("shard recorded with another control database")

const identitySchema = `CREATE TABLE IF NOT EXISTS rebalance_identity (id INTEGER PRIMARY KEY CHECK (id = 0), shard TEXT NOT NULL)`

const controlIdentitySchema = `CREATE TABLE IF NOT EXISTS rebalance_control (id INTEGER PRIMARY KEY CHECK (id = 0), control TEXT NOT NULL)`

const positionsSchema = `CREATE TABLE IF NOT EXISTS rebalance_shards (position INTEGER PRIMARY KEY, shard TEXT NOT NULL UNIQUE)`

// checkIdentities gives each shard its identity if it has none, and checks the list against
// itself and against the positions the control database recorded, recording new ones.
func (s *Store) checkIdentities(ctx context.Context) error {
	ids := make([]string, len(s.shards))
	for i, db := range s.shards {
		var err error
		if ids[i], err = s.identity(ctx, db); err != nil {
			return s.wrap(i, "identity", err)
		}
		for j := range i {
			if ids[j] == ids[i] {
				return fmt.Errorf("sqlstore: %s and %s are one database (identity %s): list each database once: %w", s.names[j], s.names[i], ids[i], ErrShardOrder)
			}
		}
	}
	if err := s.execAll(ctx, s.control, []string{positionsSchema}); err != nil {
		return fmt.Errorf("sqlstore: control database: create the shard positions table: %w", err)
	}
	for i, id := range ids {
		if _, err := s.control.ExecContext(ctx, "INSERT INTO rebalance_shards (position, shard) VALUES ($1, $2) ON CONFLICT DO NOTHING", i, id); err != nil {
			return fmt.Errorf("sqlstore: control database: record the shard at position %d: %w", i, err)
		}
		var at sql.NullString
		if err := s.control.QueryRowContext(ctx, "SELECT shard FROM rebalance_shards WHERE position = $1", i).Scan(&at); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlstore: control database: read the shard at position %d: %w", i, err)
		}
		if at.String == id {
			continue
		}
		var was sql.NullInt64
		if err := s.control.QueryRowContext(ctx, "SELECT position FROM rebalance_shards WHERE shard = $1", id).Scan(&was); err != nil && !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlstore: control database: read the position of shard %s: %w", id, err)
		}
		known := "a database the control database has not seen"
		if was.Valid {
			known = fmt.Sprintf("the database recorded at position %d", was.Int64)
		}
		return fmt.Errorf("sqlstore: %s is %s, not the one recorded at position %d: the shards are listed in another order than before (to list them anew, delete the rows of rebalance_shards in the control database): %w",
			s.names[i], known, i, ErrShardOrder)
	}
	s.ids.Store(&ids)
	if _, err := s.recordedVersions(ctx); err != nil {
		return err
	}
	s.versions.fetched.Store(time.Now().UnixNano())
	control, err := s.identity(ctx, s.control)
	if err != nil {
		return fmt.Errorf("sqlstore: control database: identity: %w", err)
	}
	s.controlID.Store(&control)
	for i, db := range s.shards {
		if err := s.execAll(ctx, db, []string{controlIdentitySchema}); err != nil {
			return s.wrap(i, "create the control identity table", err)
		}
		if _, err := db.ExecContext(ctx, "INSERT INTO rebalance_control (id, control) VALUES (0, $1) ON CONFLICT DO NOTHING", control); err != nil {
			return s.wrap(i, "record the control database's identity", err)
		}
		var was string
		if err := db.QueryRowContext(ctx, "SELECT control FROM rebalance_control").Scan(&was); err != nil {
			return s.wrap(i, "read the control database's identity", err)
		}
		if was != control {
			return s.wrap(i, "check the control database", fmt.Errorf("the shard was listed with control database %s, and this Store's is %s: two control databases would each issue the movers' tokens, and two movers could both write; configure the control database the other processes use (to start over with a new one, delete the row of rebalance_control on every shard): %w", was, control, ErrOtherControl))
		}
	}
	return nil
}

// Identity names the databases of the Store: the identity of its control database, which
// every shard records; "" before Init. Two Stores over the same databases give one, and so
// does a wrapper that embeds one (see rebalance.StoreIdentity).
func (s *Store) Identity() string {
	if id := s.controlID.Load(); id != nil {
		return *id
	}
	return ""
}

var _ rebalance.StoreIdentity = (*Store)(nil)

// identity returns the identity of database db, giving it one first if it has none.
func (s *Store) identity(ctx context.Context, db *sql.DB) (string, error) {
	if err := s.execAll(ctx, db, []string{identitySchema}); err != nil {
		return "", fmt.Errorf("create the identity table: %w", err)
	}
	fresh := make([]byte, 16)
	rand.Read(fresh)
	if _, err := db.ExecContext(ctx, "INSERT INTO rebalance_identity (id, shard) VALUES (0, $1) ON CONFLICT DO NOTHING", hex.EncodeToString(fresh)); err != nil {
		return "", fmt.Errorf("record it: %w", err)
	}
	var id string
	if err := db.QueryRowContext(ctx, "SELECT shard FROM rebalance_identity").Scan(&id); err != nil {
		return "", fmt.Errorf("read it: %w", err)
	}
	return id, nil
}
