package mulmax

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// The kernel against the plain loop, on every length from 0 to 100 (each tail of 0 to 7),
// random keys and multipliers, and products near the top and the bottom.
func TestMax4CrossCheck(t *testing.T) {
	t.Logf("AVX-512 kernel: %v", SIMD())
	r := rand.New(rand.NewPCG(1, 2))
	for n := 0; n <= 100; n++ {
		for range 20 {
			mults := make([]uint64, n)
			for i := range mults {
				mults[i] = r.Uint64() | 1
				if r.IntN(10) == 0 {
					mults[i] = []uint64{1, ^uint64(0), 1 << 63, 3}[r.IntN(4)]
				}
			}
			k := [4]uint64{r.Uint64() | 1, r.Uint64() | 1, 1, ^uint64(0)}
			for _, key := range k {
				want := Max1Generic(mults, key)
				if got := Max1(mults, key); got != want {
					t.Fatalf("Max1(%d mults, %x) = %x, want %x", n, key, got, want)
				}
				if useAVX512 && n > 0 {
					if got := max1AVX512(mults, key); got != want {
						t.Fatalf("kernel1(%d mults, %x) = %x, want %x", n, key, got, want)
					}
				}
				slow := uint64(0) // the obvious loop, also for Max1Generic's halves
				for _, m := range mults {
					slow = max(slow, key*m)
				}
				if want != slow {
					t.Fatalf("Max1Generic(%d mults) = %x, want %x", n, want, slow)
				}
			}
			g0, g1, g2, g3 := Max4(mults, k[0], k[1], k[2], k[3])
			w0, w1, w2, w3 := Max4Generic(mults, k[0], k[1], k[2], k[3])
			if g0 != w0 || g1 != w1 || g2 != w2 || g3 != w3 {
				t.Fatalf("Max4(%d mults) = %x %x %x %x, want %x %x %x %x", n, g0, g1, g2, g3, w0, w1, w2, w3)
			}
			if useAVX512 && n > 0 {
				var best [4]uint64
				max4AVX512(mults, &k, &best)
				if best != [4]uint64{w0, w1, w2, w3} {
					t.Fatalf("kernel(%d mults) = %x, want %x %x %x %x", n, best, w0, w1, w2, w3)
				}
			}
		}
	}
}

var sink uint64

// BenchmarkMax4 times four keys' maxima over n multipliers, plain Go against Max4, and
// reports ns per multiplication.
func BenchmarkMax4(b *testing.B) {
	for _, n := range []int{10, 100, 1000} {
		mults := make([]uint64, n)
		for i := range mults {
			mults[i] = uint64(i)*0x9e3779b97f4a7c15 | 1
		}
		for _, impl := range []string{"generic1", "max1"} {
			b.Run(fmt.Sprintf("impl=%s/mults=%d", impl, n), func(b *testing.B) {
				f := Max1
				if impl == "generic1" {
					f = Max1Generic
				}
				k := uint64(12345)
				for b.Loop() {
					sink += f(mults, k)
					k += 2
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/mul")
			})
		}
		for _, impl := range []string{"generic", "max4"} {
			b.Run(fmt.Sprintf("impl=%s/mults=%d", impl, n), func(b *testing.B) {
				f := Max4
				if impl == "generic" {
					f = Max4Generic
				}
				k := uint64(12345)
				for b.Loop() {
					b0, b1, b2, b3 := f(mults, k, k+2, k+4, k+6)
					sink += b0 ^ b1 ^ b2 ^ b3
					k += 8
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(4*n), "ns/mul")
			})
		}
	}
}
