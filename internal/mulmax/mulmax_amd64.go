package mulmax

// useAVX512 is true when the processor has AVX-512 F and DQ and the operating system saves
// the ZMM registers (XCR0 bits 1, 2, 5, 6, 7).
var useAVX512 = hasAVX512()

func hasAVX512() bool {
	_, _, ecx1, _ := cpuid(1, 0)
	if ecx1&(1<<27) == 0 { // OSXSAVE: XGETBV is usable
		return false
	}
	if xcr0, _ := xgetbv(); xcr0&0xe6 != 0xe6 {
		return false
	}
	maxLeaf, _, _, _ := cpuid(0, 0)
	if maxLeaf < 7 {
		return false
	}
	_, ebx7, _, _ := cpuid(7, 0)
	return ebx7&(1<<16) != 0 && ebx7&(1<<17) != 0 // AVX512F, AVX512DQ
}

func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)

func xgetbv() (eax, edx uint32)

// max4AVX512 sets best[j] to the largest k[j] × m over mults; len(mults) > 0.
//
//go:noescape
func max4AVX512(mults []uint64, k *[4]uint64, best *[4]uint64)

// max1AVX512 returns the largest k × m over mults; len(mults) > 0.
//
//go:noescape
func max1AVX512(mults []uint64, k uint64) uint64
