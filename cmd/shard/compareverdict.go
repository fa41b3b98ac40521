package main

import (
	"fmt"
	"io"
	"strings"
)

// The verdict that ends compare: the winners of the main table, each by one figure, and which
// strategy fits which need, drawn from the same figures.

// verdict is the short conclusion of compare's main table.
type verdict struct {
	// Fastest has the lowest ns/op ("" without timing); MostEven the lowest max/mean;
	// LeastMoved the fewest keys moved on n -> n+1 among the even ones (Even).
	Fastest    string `json:"fastest,omitempty"`
	MostEven   string `json:"most_even"`
	LeastMoved string `json:"least_moved"`
	// Even are the strategies whose stddev is within twice the ideal's: the others are
	// left out of the movement and the needs, since moving few keys is easy when the load
	// is uneven.
	Even []string `json:"even"`
	// Numbered is the even dense strategy that moves the fewest keys when a shard is added,
	// for shards numbered 0..n-1; Named the even pool that does, for named nodes.
	Numbered string `json:"numbered"`
	Named    string `json:"named"`
}

// makeVerdict draws the verdict from the rows of rep.
func (rep *compareReport) makeVerdict() *verdict {
	v := &verdict{}
	var fastest, even, moved, numbered, named *compareRow
	for i := range rep.Rows {
		r := &rep.Rows[i]
		if !r.Fits {
			continue
		}
		if rep.Rounds > 0 && r.NsPerOp > 0 && (fastest == nil || r.NsPerOp < fastest.NsPerOp) {
			fastest = r
		}
		if even == nil || r.MaxMean < even.MaxMean {
			even = r
		}
		if r.StddevPct > 2*rep.Ideal.StddevPct || r.GrowPct == nil {
			continue
		}
		v.Even = append(v.Even, r.Strategy)
		less := func(o *compareRow) bool { return o == nil || *r.GrowPct < *o.GrowPct }
		if less(moved) {
			moved = r
		}
		if strings.HasSuffix(r.Strategy, " pool") {
			if less(named) {
				named = r
			}
		} else if less(numbered) {
			numbered = r
		}
	}
	name := func(r *compareRow) string {
		if r == nil {
			return ""
		}
		return r.Strategy
	}
	v.Fastest, v.MostEven, v.LeastMoved, v.Numbered, v.Named = name(fastest), name(even), name(moved), name(numbered), name(named)
	return v
}

// writeVerdict prints the verdict in a few lines.
func (rep *compareReport) writeVerdict(w io.Writer) error {
	v := rep.Verdict
	if v == nil {
		return nil
	}
	row := func(name string) compareRow {
		for _, r := range rep.Rows {
			if r.Strategy == name {
				return r
			}
		}
		return compareRow{}
	}
	n := rep.Shards
	const indent = "                  "
	line := func(label, text string) { // text wrapped at 90 columns, under the first line's
		var lines []string
		cur := ""
		for _, word := range strings.Fields(text) {
			if cur != "" && len(indent)+len(cur)+1+len(word) > 90 {
				lines, cur = append(lines, cur), ""
			}
			cur = strings.TrimPrefix(cur+" "+word, " ")
		}
		fmt.Fprintf(w, "  %-16s%s\n", label, strings.Join(append(lines, cur), "\n"+indent))
	}
	fmt.Fprint(w, "\nVerdict, from the first table on these keys:\n")
	if v.Fastest != "" {
		line("fastest", fmt.Sprintf("%s: %.1f ns a Locate", v.Fastest, row(v.Fastest).NsPerOp))
	} else {
		line("fastest", "not timed (-rounds 0)")
	}
	line("most even", fmt.Sprintf("%s: its fullest shard holds %.3f times the mean", v.MostEven, row(v.MostEven).MaxMean))
	if v.LeastMoved == "" {
		line("least movement", fmt.Sprintf("none: no strategy's stddev is within twice the ideal's (%.2f%%); more keys give a verdict", rep.Ideal.StddevPct))
		return nil
	}
	line("least movement", fmt.Sprintf("%s: %s%% of the keys on %d->%d (ideal %s%%), of the %d strategies whose stddev is within twice the ideal's",
		v.LeastMoved, pct(row(v.LeastMoved).GrowPct), n, n+1, pct(rep.Ideal.GrowPct), len(v.Even)))
	var needs []string
	if v.Numbered != "" {
		needs = append(needs, "numbered shards that grow and shrink: "+v.Numbered)
	}
	if v.Named != "" {
		needs = append(needs, "named nodes that join and leave: "+v.Named)
	}
	needs = append(needs, "a table an operator edits and moves by hand: partitions or redis-cluster (shard table edit)")
	line("fits", strings.Join(needs, "; "))
	return nil
}
