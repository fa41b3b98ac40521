#include "textflag.h"

// func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL eaxArg+0(FP), AX
	MOVL ecxArg+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// func xgetbv() (eax, edx uint32)
TEXT ·xgetbv(SB), NOSPLIT, $0-8
	MOVL $0, CX
	XGETBV
	MOVL AX, eax+0(FP)
	MOVL DX, edx+4(FP)
	RET

// func max4AVX512(mults []uint64, k *[4]uint64, best *[4]uint64)
//
// Z0-Z3: the four keys in every lane; Z4-Z7: each key's running maxima, eight lanes; the
// multipliers eight at a time, the last 1 to 7 by a zero-masked load (a zero lane scores 0,
// which loses to any product that counts: rendezvous scores are odd).
TEXT ·max4AVX512(SB), NOSPLIT, $0-40
	MOVQ mults_base+0(FP), SI
	MOVQ mults_len+8(FP), CX
	MOVQ k+24(FP), DX
	MOVQ best+32(FP), DI
	VPBROADCASTQ 0(DX), Z0
	VPBROADCASTQ 8(DX), Z1
	VPBROADCASTQ 16(DX), Z2
	VPBROADCASTQ 24(DX), Z3
	VPXORQ Z4, Z4, Z4
	VPXORQ Z5, Z5, Z5
	VPXORQ Z6, Z6, Z6
	VPXORQ Z7, Z7, Z7

loop8:
	CMPQ CX, $8
	JB   tail
	VMOVDQU64 (SI), Z8
	VPMULLQ   Z8, Z0, Z9
	VPMULLQ   Z8, Z1, Z10
	VPMULLQ   Z8, Z2, Z11
	VPMULLQ   Z8, Z3, Z12
	VPMAXUQ   Z9, Z4, Z4
	VPMAXUQ   Z10, Z5, Z5
	VPMAXUQ   Z11, Z6, Z6
	VPMAXUQ   Z12, Z7, Z7
	ADDQ      $64, SI
	SUBQ      $8, CX
	JMP       loop8

tail:
	TESTQ CX, CX
	JZ    reduce
	MOVQ  $1, AX
	SHLQ  CX, AX
	DECQ  AX
	KMOVW AX, K1
	VMOVDQU64.Z (SI), K1, Z8
	VPMULLQ   Z8, Z0, Z9
	VPMULLQ   Z8, Z1, Z10
	VPMULLQ   Z8, Z2, Z11
	VPMULLQ   Z8, Z3, Z12
	VPMAXUQ   Z9, Z4, Z4
	VPMAXUQ   Z10, Z5, Z5
	VPMAXUQ   Z11, Z6, Z6
	VPMAXUQ   Z12, Z7, Z7

reduce:
	// Each of Z4-Z7 to its largest lane: 8 -> 4 -> 2 -> 1.
	VEXTRACTI64X4 $1, Z4, Y8
	VPMAXUQ       Y8, Y4, Y4
	VEXTRACTI128  $1, Y4, X8
	VPMAXUQ       X8, X4, X4
	VPSHUFD       $0x4e, X4, X8
	VPMAXUQ       X8, X4, X4
	VMOVQ         X4, 0(DI)

	VEXTRACTI64X4 $1, Z5, Y8
	VPMAXUQ       Y8, Y5, Y5
	VEXTRACTI128  $1, Y5, X8
	VPMAXUQ       X8, X5, X5
	VPSHUFD       $0x4e, X5, X8
	VPMAXUQ       X8, X5, X5
	VMOVQ         X5, 8(DI)

	VEXTRACTI64X4 $1, Z6, Y8
	VPMAXUQ       Y8, Y6, Y6
	VEXTRACTI128  $1, Y6, X8
	VPMAXUQ       X8, X6, X6
	VPSHUFD       $0x4e, X6, X8
	VPMAXUQ       X8, X6, X6
	VMOVQ         X6, 16(DI)

	VEXTRACTI64X4 $1, Z7, Y8
	VPMAXUQ       Y8, Y7, Y7
	VEXTRACTI128  $1, Y7, X8
	VPMAXUQ       X8, X7, X7
	VPSHUFD       $0x4e, X7, X8
	VPMAXUQ       X8, X7, X7
	VMOVQ         X7, 24(DI)

	VZEROUPPER
	RET

// func max1AVX512(mults []uint64, k uint64) uint64
//
// One key: four accumulators (Z4-Z7) so that the maxima of 32 multipliers per round run
// side by side, then eight at a time, then a zero-masked tail.
TEXT ·max1AVX512(SB), NOSPLIT, $0-40
	MOVQ mults_base+0(FP), SI
	MOVQ mults_len+8(FP), CX
	VPBROADCASTQ k+24(FP), Z0
	VPXORQ Z4, Z4, Z4
	VPXORQ Z5, Z5, Z5
	VPXORQ Z6, Z6, Z6
	VPXORQ Z7, Z7, Z7

loop32:
	CMPQ    CX, $32
	JB      loop8
	VPMULLQ (SI), Z0, Z8
	VPMULLQ 64(SI), Z0, Z9
	VPMULLQ 128(SI), Z0, Z10
	VPMULLQ 192(SI), Z0, Z11
	VPMAXUQ Z8, Z4, Z4
	VPMAXUQ Z9, Z5, Z5
	VPMAXUQ Z10, Z6, Z6
	VPMAXUQ Z11, Z7, Z7
	ADDQ    $256, SI
	SUBQ    $32, CX
	JMP     loop32

loop8:
	CMPQ    CX, $8
	JB      tail1
	VPMULLQ (SI), Z0, Z8
	VPMAXUQ Z8, Z4, Z4
	ADDQ    $64, SI
	SUBQ    $8, CX
	JMP     loop8

tail1:
	TESTQ CX, CX
	JZ    reduce1
	MOVQ  $1, AX
	SHLQ  CX, AX
	DECQ  AX
	KMOVW AX, K1
	VMOVDQU64.Z (SI), K1, Z8
	VPMULLQ Z8, Z0, Z8
	VPMAXUQ Z8, Z4, Z4

reduce1:
	VPMAXUQ       Z5, Z4, Z4
	VPMAXUQ       Z7, Z6, Z6
	VPMAXUQ       Z6, Z4, Z4
	VEXTRACTI64X4 $1, Z4, Y8
	VPMAXUQ       Y8, Y4, Y4
	VEXTRACTI128  $1, Y4, X8
	VPMAXUQ       X8, X4, X4
	VPSHUFD       $0x4e, X4, X8
	VPMAXUQ       X8, X4, X4
	VMOVQ         X4, ret+32(FP)
	VZEROUPPER
	RET
