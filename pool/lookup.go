package pool

// This file holds what the lookups of several strategies share.

// splitMix64 returns the i-th output (from 0) of SplitMix64 seeded with seed (Guy L. Steele
// Jr., Doug Lea, Christine H. Flood, "Fast Splittable Pseudorandom Number Generators",
// OOPSLA 2014): a stream of well-mixed 64-bit values drawn from one hash.
func splitMix64(seed, i uint64) uint64 {
	z := seed + (i+1)*0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// pickedSmall is how many nodes AppendN remembers in a fixed array before it allocates.
const pickedSmall = 16

// picked is the list of nodes an AppendN has chosen so far, by their slot in the strategy's
// table, each with a value the strategy keeps for it. It lives on AppendN's stack (make it
// with a zero value and use it by pointer) and allocates only past pickedSmall nodes, when
// it adds an index of the pool's size so that a lookup stays O(1).
type picked struct {
	small    [pickedSmall]int32
	smallAux [pickedSmall]int32
	n        int
	big      []int32 // when allocated: the slots in order
	bigAux   []int32
	where    []int32 // when allocated: where[slot] = position in big + 1, 0 if absent
}

// len returns the number of nodes picked.
func (p *picked) len() int { return p.n }

// find returns the position of slot in the list and its value, or -1.
func (p *picked) find(slot int32) (pos int, aux int32) {
	if p.where != nil {
		if i := p.where[slot] - 1; i >= 0 {
			return int(i), p.bigAux[i]
		}
		return -1, 0
	}
	for i, s := range p.small[:p.n] {
		if s == slot {
			return i, p.smallAux[i]
		}
	}
	return -1, 0
}

// has reports whether slot was picked.
func (p *picked) has(slot int32) bool {
	i, _ := p.find(slot)
	return i >= 0
}

// add appends slot, which was not picked, with its value; slots is the pool's slot count.
func (p *picked) add(slot, aux int32, slots int) {
	if p.n < pickedSmall {
		p.small[p.n], p.smallAux[p.n] = slot, aux
		p.n++
		return
	}
	if p.where == nil {
		p.where = make([]int32, slots)
		p.big = append(make([]int32, 0, 2*pickedSmall), p.small[:]...)
		p.bigAux = append(make([]int32, 0, 2*pickedSmall), p.smallAux[:]...)
		for i, s := range p.small {
			p.where[s] = int32(i + 1)
		}
	}
	p.big = append(p.big, slot)
	p.bigAux = append(p.bigAux, aux)
	p.n++
	p.where[slot] = int32(p.n)
}
