package coord

import (
	"bytes"
	"encoding"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/catalog"
	"github.com/shardkit/shard/pool"
)

// FormatVersion is the placement record format this build writes and the newest it reads.
// A change that an older build would misread (a new field that changes routing, say)
// increments it, so that older builds refuse the record instead of routing by half of it.
const FormatVersion = 1

// Placement is the placement record: the layout every process routes by, and the migration
// under way. A Placement read from a Client (Current, Get) shares its slices with the
// published view and must not be modified; Clone makes a copy to edit.
type Placement struct {
	// Format is the record's format version; Update writes FormatVersion whatever it holds.
	Format int
	// Writer is the Identity of the process that wrote the record; Update sets it.
	Writer string
	// Layout is the layout in force. During a migration it is Migration.Before until the
	// mover records the switch.
	Layout Layout
	// Migration is the migration under way, nil when there is none.
	Migration *Migration
}

// Layout is one placement strategy with its parameters: either a dense strategy of package
// shard by its catalog name (Strategy, Shards, Vnodes, Partitions, Table) or a named pool by
// its catalog pool name (Pool, Nodes). Exactly one of Strategy and Pool is set.
type Layout struct {
	// Strategy is the name of a dense strategy in catalog.All ("jump", "murmur-ring",
	// "partitions", ...), with Shards shards.
	Strategy string
	Shards   int
	// Vnodes and Partitions are catalog.Options for the strategies that take them; zero
	// means catalog's default.
	Vnodes     int
	Partitions int
	// Table, when not empty, is the sharder's own table as its MarshalText writes it (the
	// partition table of "partitions" and "redis-cluster", the trie's shape), loaded with
	// UnmarshalText after New: the record then carries moves made with shard.Partitions.Move.
	Table string
	// Pool is the name of a pool strategy in catalog.Pools ("ring", "maglev", ...), with
	// Nodes as its members in join order.
	Pool  string
	Nodes []pool.Node
}

// Phase is the state of a migration in the record. The mover writes it; application
// processes read it to know which layouts to route by.
type Phase string

// The phases of a migration, in order.
const (
	PhasePlanned   Phase = "planned"   // recorded; no mover has started copying
	PhaseMoving    Phase = "moving"    // the mover copies owners from Before to After
	PhaseFinishing Phase = "finishing" // every owner is served by After; old copies are being removed
	PhaseDone      Phase = "done"      // complete; Layout is After
)

var phases = []Phase{PhasePlanned, PhaseMoving, PhaseFinishing, PhaseDone}

// Migration is the state of one migration from Before to After.
type Migration struct {
	ID     string // names the migration in the stores' marks; not empty
	Before Layout
	After  Layout
	Phase  Phase
	// Epoch is the fencing token of the mover that last wrote this state (Mover.Epoch); 0
	// before any mover ran.
	Epoch uint64
}

// Clone returns a deep copy of p, safe to modify.
func (p Placement) Clone() Placement {
	p.Layout = p.Layout.clone()
	if p.Migration != nil {
		m := *p.Migration
		m.Before, m.After = m.Before.clone(), m.After.clone()
		p.Migration = &m
	}
	return p
}

func (l Layout) clone() Layout {
	l.Nodes = slices.Clone(l.Nodes)
	return l
}

// Options returns the catalog options of a dense layout.
func (l Layout) Options() catalog.Options {
	return catalog.Options{Vnodes: l.Vnodes, Partitions: l.Partitions}
}

// Sharder builds the dense strategy the layout names, with its table loaded when it has
// one. It fails, wrapping ErrRecord, for a pool layout or parameters the strategy refuses.
func (l Layout) Sharder() (shard.Sharder, error) { return l.sharder("layout") }

// sharder is Sharder with errors that name the layout as what.
func (l Layout) sharder(what string) (shard.Sharder, error) {
	if l.Strategy == "" {
		return nil, fmt.Errorf("coord: %s of pool %q has no dense strategy: use NewPool: %w", what, l.Pool, ErrRecord)
	}
	s, ok := catalog.Find(l.Strategy)
	if !ok {
		return nil, fmt.Errorf("coord: %s names strategy %q, which catalog does not list: %w", what, l.Strategy, ErrRecord)
	}
	if l.Vnodes < 0 || l.Partitions < 0 {
		return nil, fmt.Errorf("coord: %s: strategy %q: negative vnodes %d or partitions %d: %w", what, l.Strategy, l.Vnodes, l.Partitions, ErrRecord)
	}
	sh, err := s.New(l.Shards, l.Options())
	if err != nil {
		return nil, fmt.Errorf("coord: %s: strategy %q with %d shards: %w: %w", what, l.Strategy, l.Shards, err, ErrRecord)
	}
	if l.Table != "" {
		u, ok := sh.(encoding.TextUnmarshaler)
		if !ok {
			return nil, fmt.Errorf("coord: %s: strategy %q has a table, but its sharder loads none: %w", what, l.Strategy, ErrRecord)
		}
		if err := u.UnmarshalText([]byte(l.Table)); err != nil {
			return nil, fmt.Errorf("coord: %s: strategy %q: table: %w: %w", what, l.Strategy, err, ErrRecord)
		}
		if sh.Shards() != l.Shards {
			return nil, fmt.Errorf("coord: %s: strategy %q says %d shards, its table %d: %w", what, l.Strategy, l.Shards, sh.Shards(), ErrRecord)
		}
	}
	return sh, nil
}

// NewPool builds the pool the layout names. It fails, wrapping ErrRecord, for a dense
// layout or members the pool refuses.
func (l Layout) NewPool() (pool.Pool, error) { return l.newPool("layout") }

func (l Layout) newPool(what string) (pool.Pool, error) {
	if l.Pool == "" {
		return nil, fmt.Errorf("coord: %s of strategy %q is not a pool: use Sharder: %w", what, l.Strategy, ErrRecord)
	}
	s, ok := catalog.FindPool(l.Pool)
	if !ok {
		return nil, fmt.Errorf("coord: %s names pool strategy %q, which catalog does not list: %w", what, l.Pool, ErrRecord)
	}
	p, err := s.New(slices.Clone(l.Nodes), catalog.Options{Vnodes: l.Vnodes})
	if err != nil {
		return nil, fmt.Errorf("coord: %s: pool %q of %d nodes: %w: %w", what, l.Pool, len(l.Nodes), err, ErrRecord)
	}
	return p, nil
}

// check builds the layout once: a record is accepted only if every process can build it.
func (l Layout) check(what string) error {
	switch {
	case l.Strategy != "" && l.Pool != "":
		return fmt.Errorf("coord: %s names both strategy %q and pool %q: %w", what, l.Strategy, l.Pool, ErrRecord)
	case l.Strategy != "":
		if len(l.Nodes) > 0 {
			return fmt.Errorf("coord: %s: dense strategy %q with pool nodes: %w", what, l.Strategy, ErrRecord)
		}
		_, err := l.sharder(what)
		return err
	case l.Pool != "":
		if l.Shards != 0 || l.Partitions != 0 || l.Table != "" {
			return fmt.Errorf("coord: %s: pool %q with dense parameters (shards, partitions, table): %w", what, l.Pool, ErrRecord)
		}
		_, err := l.newPool(what)
		return err
	}
	return fmt.Errorf("coord: %s names no strategy and no pool: %w", what, ErrRecord)
}

// Check reports whether p is a placement every process can route by: each layout builds,
// and a migration has an ID, a known phase, and layouts of its own, and its Layout is the one
// its phase says is in force: Before while planned or moving, After once done (Before or
// After while finishing). Layouts are compared field by field (a default left zero in one
// and spelled out in the other differs). A record whose Layout is not its migration's
// would route by one layout while labelling accesses with the migration's placement, and a
// write would land where the placement the shards serve does not read it. Errors wrap
// ErrRecord.
func (p Placement) Check() error {
	if err := p.Layout.check("layout"); err != nil {
		return err
	}
	m := p.Migration
	if m == nil {
		return nil
	}
	if m.ID == "" {
		return fmt.Errorf("coord: migration without an ID: %w", ErrRecord)
	}
	if !slices.Contains(phases, m.Phase) {
		return fmt.Errorf("coord: migration %q: phase %q is none of %q: %w", m.ID, m.Phase, phases, ErrRecord)
	}
	if err := m.Before.check("migration " + m.ID + " before"); err != nil {
		return err
	}
	if err := m.After.check("migration " + m.ID + " after"); err != nil {
		return err
	}
	switch {
	case m.Phase == PhaseDone && !p.Layout.equal(m.After):
		return fmt.Errorf("coord: migration %q is done, but the layout in force (%s) is not its after layout (%s): a done migration's after layout is the layout: %w",
			m.ID, p.Layout.describe(), m.After.describe(), ErrRecord)
	case (m.Phase == PhasePlanned || m.Phase == PhaseMoving) && !p.Layout.equal(m.Before):
		return fmt.Errorf("coord: migration %q is %s, but the layout in force (%s) is not its before layout (%s): until it is done the before layout is the layout: %w",
			m.ID, m.Phase, p.Layout.describe(), m.Before.describe(), ErrRecord)
	case m.Phase == PhaseFinishing && !p.Layout.equal(m.Before) && !p.Layout.equal(m.After):
		return fmt.Errorf("coord: migration %q is finishing, but the layout in force (%s) is neither its before layout (%s) nor its after layout (%s): %w",
			m.ID, p.Layout.describe(), m.Before.describe(), m.After.describe(), ErrRecord)
	}
	return nil
}

// equal says whether l and o are the same layout, field by field.
func (l Layout) equal(o Layout) bool {
	return l.Strategy == o.Strategy && l.Shards == o.Shards && l.Vnodes == o.Vnodes && l.Partitions == o.Partitions &&
		l.Table == o.Table && l.Pool == o.Pool && slices.Equal(l.Nodes, o.Nodes)
}

// describe names the layout in errors: "jump, 5 shards", "pool ring of 3 nodes".
func (l Layout) describe() string {
	if l.Pool != "" {
		return fmt.Sprintf("pool %s of %d nodes", l.Pool, len(l.Nodes))
	}
	s := fmt.Sprintf("%s, %d shards", l.Strategy, l.Shards)
	if l.Table != "" {
		s += ", with a table"
	}
	return s
}

// The stored JSON. Its field names are the format; Go names may change, these may not
// without a new FormatVersion.
type (
	wireRecord struct {
		Format    int            `json:"format"`
		Writer    string         `json:"writer,omitempty"`
		Layout    wireLayout     `json:"layout"`
		Migration *wireMigration `json:"migration,omitempty"`
	}
	wireLayout struct {
		Strategy   string     `json:"strategy,omitempty"`
		Shards     int        `json:"shards,omitempty"`
		Vnodes     int        `json:"vnodes,omitempty"`
		Partitions int        `json:"partitions,omitempty"`
		Table      string     `json:"table,omitempty"`
		Pool       string     `json:"pool,omitempty"`
		Nodes      []wireNode `json:"nodes,omitempty"`
	}
	wireNode struct {
		Name   string `json:"name"`
		Weight int    `json:"weight,omitempty"`
	}
	wireMigration struct {
		ID     string     `json:"id"`
		Before wireLayout `json:"before"`
		After  wireLayout `json:"after"`
		Phase  Phase      `json:"phase"`
		Epoch  uint64     `json:"epoch,omitempty"`
	}
)

func toWire(l Layout) wireLayout {
	w := wireLayout{Strategy: l.Strategy, Shards: l.Shards, Vnodes: l.Vnodes, Partitions: l.Partitions, Table: l.Table, Pool: l.Pool}
	for _, n := range l.Nodes {
		w.Nodes = append(w.Nodes, wireNode{Name: n.Name, Weight: n.Weight})
	}
	return w
}

func fromWire(w wireLayout) Layout {
	l := Layout{Strategy: w.Strategy, Shards: w.Shards, Vnodes: w.Vnodes, Partitions: w.Partitions, Table: w.Table, Pool: w.Pool}
	for _, n := range w.Nodes {
		l.Nodes = append(l.Nodes, pool.Node{Name: n.Name, Weight: n.Weight})
	}
	return l
}

// Encode checks p and returns the record's JSON as Update stores it, with format FormatVersion
// and the given writer. It fails, wrapping ErrInput and ErrRecord, when p does not pass Check.
func Encode(p Placement, writer string) ([]byte, error) {
	if err := p.Check(); err != nil {
		return nil, fmt.Errorf("%w (%w)", err, ErrInput)
	}
	w := wireRecord{Format: FormatVersion, Writer: writer, Layout: toWire(p.Layout)}
	if m := p.Migration; m != nil {
		w.Migration = &wireMigration{ID: m.ID, Before: toWire(m.Before), After: toWire(m.After), Phase: m.Phase, Epoch: m.Epoch}
	}
	return json.Marshal(w)
}

// Decode parses a stored record, refusing it whole when it is not valid JSON of this format
// (ErrRecord) or was written by a newer format (ErrVersion, checked before anything else is
// read, since a newer format may mean anything).
func Decode(data []byte) (Placement, error) {
	var head struct {
		Format *int `json:"format"`
	}
	if err := json.Unmarshal(data, &head); err != nil {
		return Placement{}, fmt.Errorf("coord: placement record is not a JSON object: %v: %w", err, ErrRecord)
	}
	switch {
	case head.Format == nil:
		return Placement{}, fmt.Errorf("coord: placement record has no format field: %w", ErrRecord)
	case *head.Format > FormatVersion:
		return Placement{}, fmt.Errorf("coord: placement record has format %d, this build reads up to %d: upgrade this process: %w", *head.Format, FormatVersion, ErrVersion)
	case *head.Format < 1:
		return Placement{}, fmt.Errorf("coord: placement record has format %d, formats start at 1: %w", *head.Format, ErrRecord)
	}
	var w wireRecord
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields() // a field this format does not define is a broken record
	if err := dec.Decode(&w); err != nil {
		return Placement{}, fmt.Errorf("coord: placement record of format %d: %v: %w", *head.Format, err, ErrRecord)
	}
	if dec.More() {
		return Placement{}, fmt.Errorf("coord: placement record has data after its JSON object: %w", ErrRecord)
	}
	p := Placement{Format: w.Format, Writer: w.Writer, Layout: fromWire(w.Layout)}
	if m := w.Migration; m != nil {
		p.Migration = &Migration{ID: m.ID, Before: fromWire(m.Before), After: fromWire(m.After), Phase: m.Phase, Epoch: m.Epoch}
	}
	if err := p.Check(); err != nil {
		return Placement{}, err
	}
	return p, nil
}
