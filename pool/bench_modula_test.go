package pool

import (
	"fmt"
	"testing"
)

// BenchmarkModula times Locate and AppendN(3) of weighted modulo next to the ring with
// default options, in one run: go test ./pool -run '^$' -bench Modula
func BenchmarkModula(b *testing.B) {
	keys := testKeys(1 << 14)
	for _, size := range []int{10, 100, 1000, 10000} {
		nodes := make([]Node, size)
		for i := range nodes {
			nodes[i] = Node{Name: fmt.Sprintf("10.%d.%d.%d:11211", i>>16, i>>8&255, i&255), Weight: 1 + i%3}
		}
		for _, c := range []struct {
			name string
			new  func([]Node) (Pool, error)
		}{
			{"modula", newModulaPool(ModulaOptions{})},
			{"ring", newRingPool(RingOptions{})},
		} {
			p, err := c.new(nodes)
			if err != nil {
				b.Fatal(err)
			}
			b.Run(fmt.Sprintf("pool=%s/nodes=%d/op=locate", c.name, size), func(b *testing.B) {
				b.ReportAllocs()
				s := 0
				for i := 0; b.Loop(); i++ {
					s += len(p.Locate(keys[i&(len(keys)-1)]))
				}
				poolSink = s
			})
			b.Run(fmt.Sprintf("pool=%s/nodes=%d/op=appendn3", c.name, size), func(b *testing.B) {
				b.ReportAllocs()
				dst := make([]string, 0, 3)
				s := 0
				for i := 0; b.Loop(); i++ {
					dst = p.AppendN(dst[:0], keys[i&(len(keys)-1)], 3)
					s += len(dst[2])
				}
				poolSink = s
			})
		}
	}
}
