package main

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPlanRingExact runs shard plan on rings of every kind the command builds and holds
// the exact plan from the arcs to the key sample: the share that moves, overall and from
// each owner to each other, agrees within sampling error (the sample's keys are random, so
// each share it measures is binomial around the exact one), and adding or removing one
// owner of v points moves at most v arcs (the sharding lecture [003]).
func TestPlanRingExact(t *testing.T) {
	const keys = 40_000
	for _, c := range []struct {
		name string
		args []string
		arcs int // the most arcs the change may move
	}{
		{"murmur-ring grows", []string{"-strategy", "murmur-ring", "-n", "10", "-vnodes", "16", "-to", "11"}, 16},
		{"murmur-ring shrinks", []string{"-strategy", "murmur-ring", "-n", "12", "-vnodes", "16", "-to", "11"}, 16},
		{"jedis-ring grows", []string{"-strategy", "jedis-ring", "-n", "5", "-to", "6"}, 160},
		{"ring pool add", []string{"-strategy", "ring", "-nodes", "a,b,c,d,e", "-vnodes", "32", "-add", "f"}, 32},
		{"ring pool remove", []string{"-strategy", "ring", "-nodes", "a,b,c,d,e", "-vnodes", "32", "-remove", "c"}, 32},
		{"ring pool weight", []string{"-strategy", "ring", "-nodes", "a,b,c", "-vnodes", "32", "-weight", "b:3"}, 2 * 32},
		{"ring pool to nodes", []string{"-strategy", "ring", "-nodes", "a,b,c", "-vnodes", "32", "-to-nodes", "a,b,c,d"}, 32},
		{"twemproxy ketama add", []string{"-preset", "twemproxy", "-config", "nutcracker.yml", "-add", "10.0.0.4:1"}, 160},
		{"nginx consistent grown", []string{"-preset", "nginx", "-config", "nginx.conf", "-pool", "cache", "-to-config", "nginx-grown.conf"}, 160},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := workdir(t)
			args := append([]string{"plan", "-json", "-keys", strconv.Itoa(keys)}, c.args...)
			r := runShard(t, dir, "", args...)
			require.Equal(t, 0, r.code, r.stderr)
			var rep planReport
			require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep))
			require.NotNil(t, rep.Ranges, "a range plan for %s -> %s", rep.Before, rep.After)
			rp := rep.Ranges
			assert.Equal(t, "ring arcs", rp.Source)

			// The ranges are a plan: in order, apart, each a change of owner; their shares
			// sum to the plan's.
			sum := 0.0
			var prevLast uint64
			for i, h := range rp.Ranges {
				first, last := hexPosition(t, h.First), hexPosition(t, h.Last)
				require.LessOrEqual(t, first, last, "range %d", i)
				if i > 0 {
					require.Greater(t, first, prevLast, "range %d starts after range %d ends", i, i-1)
				}
				prevLast = last
				require.NotEqual(t, fmt.Sprint(h.From), fmt.Sprint(h.To), "range %d", i)
				assert.InDelta(t, (float64(last-first)+1)/(1<<64), h.Fraction, 1e-12, "range %d", i)
				sum += h.Fraction
			}
			assert.InDelta(t, rp.Fraction, sum, 1e-9, "the ranges' shares sum to the plan's")

			// The exact shares against the sample's, overall and pair by pair.
			assert.InDelta(t, rp.Fraction, rep.Fraction, samplingError(rp.Fraction, keys),
				"exact %.4f, the sample %.4f", rp.Fraction, rep.Fraction)
			exact, sampled := map[string]float64{}, map[string]float64{}
			for _, h := range rp.Ranges {
				exact[fmt.Sprint(h.From, " -> ", h.To)] += h.Fraction
			}
			for _, f := range rep.Flows {
				if fmt.Sprint(f.From) != fmt.Sprint(f.To) {
					sampled[fmt.Sprint(f.From, " -> ", f.To)] = float64(f.Count) / float64(rep.Total)
				}
			}
			for pair, share := range exact {
				assert.InDelta(t, share, sampled[pair], samplingError(share, keys), "%s: exact %.4f, the sample %.4f", pair, share, sampled[pair])
			}
			for pair, share := range sampled {
				assert.Contains(t, exact, pair, "the sample moves %.4f %s, the ranges nothing", share, pair)
			}

			// Only contiguous arcs move: at most one per point that came or went; the arc
			// across position 0 is listed as two ranges.
			arcs := len(rp.Ranges)
			if n := len(rp.Ranges); n > 1 && rp.Ranges[0].First == "0x0000000000000000" && rp.Ranges[n-1].Last == "0xffffffffffffffff" &&
				fmt.Sprint(rp.Ranges[0].From, rp.Ranges[0].To) == fmt.Sprint(rp.Ranges[n-1].From, rp.Ranges[n-1].To) {
				arcs--
			}
			t.Logf("%s: %d arcs in %d ranges (at most %d arcs); exact %.4f, the sample %.4f",
				rep.After, arcs, len(rp.Ranges), c.arcs, rp.Fraction, rep.Fraction)
			assert.LessOrEqual(t, arcs, c.arcs)
			assert.Greater(t, arcs, c.arcs/3, "about one arc per point that came or went")

			// The text shows as many ranges as -ranges asks, and says how many there are.
			text := runShard(t, dir, "", append([]string{"plan", "-keys", "1000", "-ranges", "3"}, c.args...)...)
			require.Equal(t, 0, text.code, text.stderr)
			assert.Contains(t, text.stdout, fmt.Sprintf("%s%% of the ring positions move in %d ranges", pct2(rp.Fraction), len(rp.Ranges)))
			assert.Contains(t, text.stdout, fmt.Sprintf("\n%d ranges, the 3 largest shown: -ranges N shows more, -json all\n", len(rp.Ranges)))
			assert.Len(t, rangeRow.FindAllString(text.stdout, -1), 3)
		})
	}
}

// rangeRow matches a row of the range table: two positions in hex.
var rangeRow = regexp.MustCompile(`(?m)^\| 0x[0-9a-f]{16} \| +0x[0-9a-f]{16} \|`)

// samplingError is the tolerance for a share p measured on n random keys: 4.5 standard
// deviations of the binomial, and one key.
func samplingError(p float64, n int) float64 {
	return 4.5*math.Sqrt(p*(1-p)/float64(n)) + 1/float64(n)
}

func hexPosition(t *testing.T, s string) uint64 {
	t.Helper()
	v, err := strconv.ParseUint(strings.TrimPrefix(s, "0x"), 16, 64)
	require.NoError(t, err, s)
	return v
}
