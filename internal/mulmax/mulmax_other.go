//go:build !amd64

package mulmax

const useAVX512 = false

func max4AVX512(mults []uint64, k *[4]uint64, best *[4]uint64) { panic("unreachable") }

func max1AVX512(mults []uint64, k uint64) uint64 { panic("unreachable") }
