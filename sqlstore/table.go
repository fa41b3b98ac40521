package sqlstore

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/shardkit/shard/rebalance"
)

// table is one TableSpec of a Store with the statements built from it once.
type table struct {
	TableSpec
	key    int  // the index of Key in Columns
	sqlite bool // the statements are SQLite's
	// replayRow is about what a row a replay last read held (rowBytes), 0 before any: the
	// first batch of keys of the next replay is sized by it.
	replayRow atomic.Int64

	selectAfter, selectFirst, count, insertHead, insertTail string
	// fences is the fence table of the shard a statement writes.
	fences string
	// form is how the owner column prints its values (Init reads it).
	form ownerForm

	// rowHash is PostgreSQL's hash of a row's content for Sums (setRowHash).
	rowHash string
	// sameColumns, by shard, is true in a PostgreSQL statement when the table has the
	// TableSpec's columns and no other but generated ones, of the types Init found there, as
	// checkColumns checks (setTypes); sameNames, of the names alone, before Init.
	sameColumns []string
	sameNames   string
	// types are the columns' types by name, by shard, as Init found them.
	types []map[string]string
	// unreferenced is true, in a PostgreSQL statement, when no table outside the Store
	// references the table (see Store.outsideRefs) or inherits from it, no row security
	// hides its rows and floats print exactly (see shapeError).
	unreferenced string
	// reads are the copied columns as a statement that reads them into Go selects them. On
	// SQLite each is +c AS c: an expression has no declared type, so the driver returns the
	// value as stored rather than as the declared type suggests (a DATETIME column's text
	// as a time, written back in the driver's format: another text). An ORDER BY of such a
	// statement names the table's column (t.k), not the expression, which no index holds.
	reads string
}

// newTable checks spec and builds its statements for dialect; bad is New's error maker.
func newTable(spec TableSpec, dialect Dialect, bad func(string, ...any) error) (*table, error) {
	for _, name := range append([]string{spec.Table, spec.Owner, spec.Key}, spec.Columns...) {
		if !identifier.MatchString(name) {
			return nil, bad("table %q: name %q is not a plain SQL identifier", spec.Table, name)
		}
	}
	key := slices.Index(spec.Columns, spec.Key)
	if key < 0 || !slices.Contains(spec.Columns, spec.Owner) {
		return nil, bad("table %q: Columns %q must hold the key %q and the owner %q", spec.Table, spec.Columns, spec.Key, spec.Owner)
	}
	if len(spec.Columns) > maxParams {
		return nil, bad("table %q: %d columns, more than %d", spec.Table, len(spec.Columns), maxParams)
	}
	for i, c := range spec.Columns {
		if slices.Contains(spec.Columns[:i], c) {
			return nil, bad("table %q: column %q listed twice", spec.Table, c)
		}
	}
	t := &table{TableSpec: spec, key: key, sqlite: dialect == SQLite}
	cols, n, o, k := strings.Join(spec.Columns, ", "), spec.Table, spec.Owner, spec.Key
	t.setTypes(nil)
	t.reads = cols
	if dialect == SQLite {
		reads := make([]string, len(spec.Columns))
		for i, c := range spec.Columns {
			reads[i] = "+" + c + " AS " + c
		}
		t.reads = strings.Join(reads, ", ")
	}
	t.selectFirst = fmt.Sprintf("SELECT %s FROM %s WHERE %s = $1 ORDER BY %s.%s LIMIT $2", t.reads, n, o, n, k)
	t.selectAfter = fmt.Sprintf("SELECT %s FROM %s WHERE %s = $1 AND %s > $3 ORDER BY %s.%s LIMIT $2", t.reads, n, o, k, n, k)
	t.count = fmt.Sprintf("SELECT COUNT(*) FROM %s WHERE %s = $1", n, o)
	// OR ABORT overrides a constraint's ON CONFLICT REPLACE (one declared after Init, by a
	// rebuild of the table): a copied row would delete another owner's row in its way.
	t.insertHead = fmt.Sprintf("INSERT OR ABORT INTO %s (%s) VALUES ", n, cols)
	if dialect == PostgreSQL {
		// A row keeps its values, also those of a column GENERATED ALWAYS AS IDENTITY, which
		// refuses a value without this (COPY writes them as given).
		t.insertHead = fmt.Sprintf("INSERT INTO %s (%s) OVERRIDING SYSTEM VALUE VALUES ", n, cols)
	}
	t.setRowHash(nil)
	t.fences = "rebalance_fence"
	if dialect == SQLite {
		t.fences = "main.rebalance_fence" // not the attached old shard's
	}
	t.setInsertTail(nil)
	return t, nil
}

// setInsertTail builds insertTail, which sets every column of a row that is there already
// but the key and the columns of always (GENERATED ALWAYS AS IDENTITY on PostgreSQL, which
// an UPDATE may set only to DEFAULT: a row changed there is left to the sums to find).
func (t *table) setInsertTail(always []string) {
	n, o, k := t.Table, t.Owner, t.Key
	set := []string{}
	for _, c := range t.Columns {
		if c != k && !slices.Contains(always, c) {
			set = append(set, c+" = excluded."+c)
		}
	}
	if len(set) == 0 { // the owner is the key: a row copied again is already there
		set = append(set, k+" = excluded."+k)
	}
	// A row is replaced only if it is the same owner's, or one of the owners written with
	// it that this shard does not serve yet (a row given from one moving owner to another):
	// never a served owner's row of the same key, nor one of an owner another group
	// imports, whose rows may have been compared already. What the WHERE skips, insertRows
	// and copyAttached count. upsert ends it.
	t.insertTail = fmt.Sprintf(" ON CONFLICT (%s) DO UPDATE SET %s WHERE %s.%s = excluded.%s OR %s AND ",
		k, strings.Join(set, ", "), n, o, o, t.importing(n))
}

// upsert is the ON CONFLICT clause of a write of rows of the owners whose JSON list
// (groupList) is the statement's parameter param.
func (t *table) upsert(param string) string { return t.insertTail + t.inGroup(t.Table, param) }

// inGroup is true, in a statement, when the owner of the row of table t named row is one of
// the owners whose JSON list (groupList) is the statement's parameter param.
func (t *table) inGroup(row, param string) string {
	if t.sqlite {
		return fmt.Sprintf("CAST(%s.%s AS TEXT) IN (SELECT value FROM json_each(%s))", row, t.Owner, param)
	}
	return fmt.Sprintf("CAST(%s.%s AS TEXT) IN (SELECT jsonb_array_elements_text(CAST(%s AS jsonb)))", row, t.Owner, param)
}

// groupList is owners as a JSON list, the parameter of upsert and inGroup.
func groupList(owners []string) string {
	b, _ := json.Marshal(owners) // strings only: it cannot fail
	return string(b)
}

// importing is true, in a statement, when the owner of the row of table t named row is
// fenced importing on this shard: this shard does not serve it yet.
func (t *table) importing(row string) string {
	return fmt.Sprintf("EXISTS (SELECT 1 FROM %s WHERE owner = CAST(%s.%s AS TEXT) AND state = %d)", t.fences, row, t.Owner, rebalance.Importing)
}

// ownerForm is how an owner column prints its values, which is how the fences, the change
// capture and the guard find a row's owner (CAST(owner AS TEXT)), while the copy and the
// deletion select the owner's rows by the column's own equality. The two agree only for an
// owner given as its value prints: an integer column selects the row of 7 by "007" too,
// whose fence a write of the row would never find (the guard would let a stale writer's
// write land on an old copy about to be deleted). So every owner the Store is given must be
// in this form.
type ownerForm struct {
	typ  string // the column's type, for errors
	bits int    // an integer column's width: owners are its values in decimal
	uuid bool   // a uuid column: owners are lowercase, hyphenated (8-4-4-4-12)
}

// sameAs says whether f and g take the same owners.
func (f ownerForm) sameAs(g ownerForm) bool { return f.bits == g.bits && f.uuid == g.uuid }

// check returns an error if owner is not in form f.
func (f ownerForm) check(owner string) error {
	want := ""
	switch {
	case f.bits > 0:
		n, err := strconv.ParseInt(owner, 10, f.bits)
		if err != nil {
			return fmt.Errorf("owner %q is not a %d-bit integer, which the owner column (%s) holds: %w", excerpt(owner), f.bits, f.typ, ErrOwnerForm)
		}
		want = strconv.FormatInt(n, 10)
	case f.uuid:
		want = strings.ToLower(owner)
		if len(owner) != 36 || strings.Trim(want, "0123456789abcdef-") != "" ||
			strings.Count(want, "-") != 4 || want[8] != '-' || want[13] != '-' || want[18] != '-' || want[23] != '-' {
			return fmt.Errorf("owner %q is not a uuid as the owner column prints one (lowercase, 8-4-4-4-12 hex digits): %w", excerpt(owner), ErrOwnerForm)
		}
	default:
		return nil
	}
	if owner != want {
		return fmt.Errorf("owner %q is not as the owner column (%s) prints it (%q): a write of its rows would not find its fence: %w", excerpt(owner), f.typ, want, ErrOwnerForm)
	}
	return nil
}

// ownerArg is owner as the owner column's value.
func (t *table) ownerArg(owner string) (any, error) {
	if err := t.form.check(owner); err != nil {
		return nil, fmt.Errorf("sqlstore: table %s: %w", t.Table, err)
	}
	if !t.IntOwner {
		return owner, nil
	}
	n, err := strconv.ParseInt(owner, 10, 64)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: table %s: owner %q is not an integer: %w", t.Table, owner, rebalance.ErrConfig)
	}
	return n, nil
}

// changes is the name of the table's change table (and the prefix of its triggers).
func (t *table) changes() string { return "rebalance_changes_" + t.Table }

// perStatement is how many rows one INSERT carries.
func (t *table) perStatement() int { return maxParams / len(t.Columns) }

// scanRow scans extra leading columns and then the copied columns.
func (t *table) scanRow(rs *sql.Rows, extra int) ([]any, error) {
	return t.rowScanner(extra)(rs)
}

// rowScanner returns a func that reads rows as scanRow does, each into the same slice: for a
// caller that is done with a row before it reads the next.
func (t *table) rowScanner(extra int) func(scanner) ([]any, error) {
	row := make([]any, extra+len(t.Columns))
	ptrs := make([]any, len(row))
	for i := range row {
		ptrs[i] = &row[i]
	}
	return func(rs scanner) ([]any, error) {
		if err := rs.Scan(ptrs...); err != nil {
			return nil, err
		}
		for i, v := range row {
			if b, ok := v.([]byte); ok && b == nil {
				// An empty blob, as modernc.org/sqlite reads X'': written as it is, not as NULL.
				row[i] = []byte{}
			}
		}
		return row, nil
	}
}

// tablesFor returns the tables in the order a copy writes them (parents first), or in the
// order a deletion does (children first).
func (s *Store) tablesFor(deletion bool) []*table {
	if !deletion {
		return s.tables
	}
	out := slices.Clone(s.tables)
	slices.Reverse(out)
	return out
}

// ownerArgs returns owners as t's owner column's values.
func (t *table) ownerArgs(owners []string) ([]any, error) {
	out := make([]any, len(owners))
	for i, o := range owners {
		var err error
		if out[i], err = t.ownerArg(o); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// setTypes records the columns' types Init found, by shard, and builds sameColumns of them
// (nil: before Init).
func (t *table) setTypes(types []map[string]string) {
	t.types = types
	t.sameColumns = make([]string, len(types))
	check := func(column string, named []string) string {
		// Plain identifiers: their bytes sort the same in Go and in the "C" collation.
		return fmt.Sprintf(`(SELECT array_agg(%s ORDER BY attname::text COLLATE "C") FROM pg_attribute
			WHERE attrelid = '%s'::regclass AND %s) = ARRAY['%s']::text[]`,
			column, t.Table, pgCopiedColumns, strings.Join(named, "', '"))
	}
	t.sameNames = check("attname::text", slices.Sorted(slices.Values(t.Columns)))
	for i, typ := range types {
		var named []string
		for _, c := range slices.Sorted(slices.Values(t.Columns)) {
			named = append(named, strings.ReplaceAll(c+" "+typ[c], "'", "''"))
		}
		t.sameColumns[i] = check("attname::text || ' ' || "+pgColumnType, named)
	}
}

// sameColumnsOn is sameColumns on shard, or sameNames before Init.
func (t *table) sameColumnsOn(shard int) string {
	if shard < len(t.sameColumns) {
		return t.sameColumns[shard]
	}
	return t.sameNames
}

// setRowHash sets rowHash: each column's hash with its position as the seed (a NULL hashes
// as the position), the columns' hashes XORed. A column that integer says is an integer on
// every shard hashes its value as PostgreSQL hashes a bigint (hashint8extended, which gives
// a smallint, an integer and a bigint of one value one hash, so shards may differ in the
// width); any other column its text form as bytes (COLLATE "C": a text column's own
// collation may hash "A" as "a"), which compares values of different types by what they
// print. Hashing each column costs half of hashing the row's text (ROW(...)::text quotes and
// joins every value first: 89 against 170 ms for 1M rows of messages), and an integer's value
// 0.57 of its text (a 200k-row owner of messages, four integer columns of five: 26-27
// against 46-47 ms). A column that stops being an integer after Init fails the sum
// (hashint8extended takes no other type) rather than compare it by another rule.
func (t *table) setRowHash(integer []bool) {
	hashes := make([]string, len(t.Columns))
	for i, c := range t.Columns {
		if i < len(integer) && integer[i] {
			hashes[i] = fmt.Sprintf(`COALESCE(hashint8extended(%s, %d), %d)`, c, i+1, i+1)
		} else {
			hashes[i] = fmt.Sprintf(`COALESCE(hashtextextended(%s::text COLLATE "C", %d), %d)`, c, i+1, i+1)
		}
	}
	t.rowHash = strings.Join(hashes, " # ")
}
