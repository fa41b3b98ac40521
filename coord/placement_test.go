package coord_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/coord"
	"github.com/shardkit/shard/pool"
)

func partitionTable(t *testing.T) string {
	t.Helper()
	p, err := shard.NewPartitions(3, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Move(5, 2); err != nil {
		t.Fatal(err)
	}
	text, err := p.MarshalText()
	if err != nil {
		t.Fatal(err)
	}
	return string(text)
}

func TestPlacementRoundTrip(t *testing.T) {
	table := partitionTable(t)
	in := coord.Placement{
		Layout: coord.Layout{Strategy: "partitions", Shards: 3, Partitions: 64, Table: table},
		Migration: &coord.Migration{
			ID:     "grow-1",
			Before: coord.Layout{Strategy: "partitions", Shards: 3, Partitions: 64, Table: table},
			After:  coord.Layout{Pool: "ring", Nodes: []pool.Node{{Name: "a", Weight: 2}, {Name: "b"}}},
			Phase:  coord.PhaseMoving,
			Epoch:  42,
		},
	}
	data, err := coord.Encode(in, "me")
	if err != nil {
		t.Fatal(err)
	}
	out, err := coord.Decode(data)
	if err != nil {
		t.Fatalf("Decode(%s): %v", data, err)
	}
	if out.Format != coord.FormatVersion || out.Writer != "me" {
		t.Errorf("format %d writer %q, want %d and %q", out.Format, out.Writer, coord.FormatVersion, "me")
	}
	out.Format, out.Writer = 0, ""
	if got, want := string(mustEncode(t, out)), string(data); got != want {
		t.Errorf("round trip changed the record:\n got %s\nwant %s", got, want)
	}

	// The table is loaded: partition 5 moved to shard 2.
	sh, err := out.Layout.Sharder()
	if err != nil {
		t.Fatal(err)
	}
	if got := sh.(*shard.Partitions).Table()[5]; got != 2 {
		t.Errorf("partition 5 on shard %d, want 2 as the table says", got)
	}
	p, err := out.Migration.After.NewPool()
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Nodes(); len(got) != 2 || got[0].Weight != 2 {
		t.Errorf("pool nodes %v, want a of weight 2 and b", got)
	}

	// Clone is deep: editing it leaves the original alone.
	c := out.Clone()
	c.Migration.After.Nodes[0].Name = "changed"
	c.Migration.Phase = coord.PhaseDone
	if out.Migration.After.Nodes[0].Name != "a" || out.Migration.Phase != coord.PhaseMoving {
		t.Error("Clone shares memory with the original")
	}
}

func mustEncode(t *testing.T, p coord.Placement) []byte {
	t.Helper()
	data, err := coord.Encode(p, "me")
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func TestDecodeRefuses(t *testing.T) {
	for _, c := range []struct {
		name, record string
		want         error
		says         string
	}{
		{"newer format", `{"format":2,"layout":{"strategy":"jump","shards":3},"anything":"new"}`, coord.ErrVersion, "format 2"},
		{"newer format, broken rest", `{"format":99,"layout":7}`, coord.ErrVersion, "upgrade"},
		{"not JSON", `strategy=jump`, coord.ErrRecord, "not a JSON object"},
		{"no format", `{"layout":{"strategy":"jump","shards":3}}`, coord.ErrRecord, "no format"},
		{"format 0", `{"format":0,"layout":{"strategy":"jump","shards":3}}`, coord.ErrRecord, "format 0"},
		{"unknown field", `{"format":1,"layout":{"strategy":"jump","shards":3,"replicas":2}}`, coord.ErrRecord, "replicas"},
		{"trailing data", `{"format":1,"layout":{"strategy":"jump","shards":3}} {}`, coord.ErrRecord, "after"},
		{"unknown strategy", `{"format":1,"layout":{"strategy":"jmup","shards":3}}`, coord.ErrRecord, "jmup"},
		{"zero shards", `{"format":1,"layout":{"strategy":"jump"}}`, coord.ErrRecord, "0 shards"},
		{"too many shards", `{"format":1,"layout":{"strategy":"first-byte-sha1","shards":11}}`, coord.ErrRecord, "11 shards"},
		{"no strategy", `{"format":1,"layout":{}}`, coord.ErrRecord, "no strategy"},
		{"both", `{"format":1,"layout":{"strategy":"jump","shards":3,"pool":"ring","nodes":[{"name":"a"}]}}`, coord.ErrRecord, "both"},
		{"unknown pool", `{"format":1,"layout":{"pool":"rnig","nodes":[{"name":"a"}]}}`, coord.ErrRecord, "rnig"},
		{"pool without nodes", `{"format":1,"layout":{"pool":"ring"}}`, coord.ErrRecord, "ring"},
		{"duplicate node", `{"format":1,"layout":{"pool":"ring","nodes":[{"name":"a"},{"name":"a"}]}}`, coord.ErrRecord, "ring"},
		{"bad table", `{"format":1,"layout":{"strategy":"partitions","shards":3,"partitions":64,"table":"0-10 0\n"}}`, coord.ErrRecord, "table"},
		{"table for jump", `{"format":1,"layout":{"strategy":"jump","shards":3,"table":"0 0\n"}}`, coord.ErrRecord, "loads none"},
		{"migration without ID", `{"format":1,"layout":{"strategy":"jump","shards":3},"migration":{"id":"","before":{"strategy":"jump","shards":3},"after":{"strategy":"jump","shards":4},"phase":"moving"}}`, coord.ErrRecord, "ID"},
		{"unknown phase", `{"format":1,"layout":{"strategy":"jump","shards":3},"migration":{"id":"m","before":{"strategy":"jump","shards":3},"after":{"strategy":"jump","shards":4},"phase":"half"}}`, coord.ErrRecord, "half"},
		{"bad after", `{"format":1,"layout":{"strategy":"jump","shards":3},"migration":{"id":"m","before":{"strategy":"jump","shards":3},"after":{"strategy":"jump","shards":-4},"phase":"moving"}}`, coord.ErrRecord, "after"},
	} {
		t.Run(c.name, func(t *testing.T) {
			p, err := coord.Decode([]byte(c.record))
			if !errors.Is(err, c.want) {
				t.Fatalf("Decode(%s) = %+v, %v; want an error wrapping %v", c.record, p, err, c.want)
			}
			if !strings.HasPrefix(err.Error(), "coord: ") || !strings.Contains(err.Error(), c.says) {
				t.Errorf("error %q does not start with \"coord: \" and say %q", err, c.says)
			}
			if p.Layout.Strategy != "" || p.Migration != nil {
				t.Errorf("a refused record was read in part: %+v", p)
			}
		})
	}
}

func TestEncodeRefusesInvalid(t *testing.T) {
	_, err := coord.Encode(coord.Placement{Layout: coord.Layout{Strategy: "jump", Shards: 0}}, "me")
	if !errors.Is(err, coord.ErrInput) || !errors.Is(err, coord.ErrRecord) {
		t.Fatalf("Encode of 0 shards: %v, want ErrInput and ErrRecord", err)
	}
}

// TestCheckRefusesLayoutNotInForce: a record whose Layout is not the layout its migration's
// phase puts in force (a done migration's After, a moving one's Before) is refused, wrapping
// ErrRecord: a process would route by Layout while labelling its accesses with the
// migration's placement, and a write would land where the shards' placement never reads it.
func TestCheckRefusesLayoutNotInForce(t *testing.T) {
	five, ten := coord.Layout{Strategy: "modulo", Shards: 5}, coord.Layout{Strategy: "modulo", Shards: 10}
	record := func(layout coord.Layout, phase coord.Phase) coord.Placement {
		return coord.Placement{Layout: layout, Migration: &coord.Migration{ID: "grow", Before: five, After: ten, Phase: phase}}
	}
	for _, tc := range []struct {
		p    coord.Placement
		want string // "" for accepted
	}{
		{record(ten, coord.PhaseDone), ""},
		{record(five, coord.PhaseDone), "is done, but the layout in force (modulo, 5 shards) is not its after layout (modulo, 10 shards)"},
		{record(five, coord.PhaseMoving), ""},
		{record(ten, coord.PhaseMoving), "is moving, but the layout in force (modulo, 10 shards) is not its before layout (modulo, 5 shards)"},
		{record(five, coord.PhasePlanned), ""},
		{record(ten, coord.PhasePlanned), "is planned, but the layout in force"},
		{record(five, coord.PhaseFinishing), ""},
		{record(ten, coord.PhaseFinishing), ""},
		{record(coord.Layout{Strategy: "modulo", Shards: 7}, coord.PhaseFinishing), "neither its before layout"},
	} {
		err := tc.p.Check()
		name := fmt.Sprintf("layout %d shards, %s", tc.p.Layout.Shards, tc.p.Migration.Phase)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: Check: %v, want nil", name, err)
		case tc.want != "" && (!errors.Is(err, coord.ErrRecord) || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: Check: %v, want an error wrapping ErrRecord that says %q", name, err, tc.want)
		}
		if tc.want == "" {
			continue
		}
		if _, err := coord.Encode(tc.p, "me"); !errors.Is(err, coord.ErrRecord) {
			t.Errorf("%s: Encode: %v, want ErrRecord", name, err)
		}
	}
}
