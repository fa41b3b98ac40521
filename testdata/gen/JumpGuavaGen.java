// JumpGuavaGen prints "key n bucket" lines, key as an unsigned 64-bit hex number, with
// bucket = Guava's Hashing.consistentHash(key, n). Run with:
//   java -cp /usr/share/java/guava.jar JumpGuavaGen.java > ../jump_guava.txt
import com.google.common.hash.Hashing;
import java.util.SplittableRandom;

public class JumpGuavaGen {
    static final long M = 2862933555777941757L;

    // keyReaching returns a key whose LCG state after step+1 steps has all 31 top bits set,
    // the state in which Guava's (int) addition wraps and the walk stops.
    static long wrapKey(int step, long low) {
        long inv = M; // Newton's iteration for the inverse of M modulo 2^64
        for (int i = 0; i < 6; i++) inv *= 2 - M * inv;
        long state = 0xFFFFFFFE00000000L | (low & 0x1FFFFFFFFL);
        for (int i = 0; i <= step; i++) state = (state - 1) * inv;
        return state;
    }

    public static void main(String[] args) {
        StringBuilder out = new StringBuilder();
        SplittableRandom r = new SplittableRandom(20140604);
        long[] keys = {0, 1, -1, 2, Long.MIN_VALUE, Long.MAX_VALUE, 0xDEADBEEFL, 1L << 32,
                wrapKey(0, 0), wrapKey(0, 12345), wrapKey(1, 0), wrapKey(1, 777), wrapKey(2, 99),
                wrapKey(3, 5), wrapKey(5, 1)};
        int[] counts = {1, 2, 3, 4, 5, 7, 8, 10, 16, 31, 100, 1000, 1024, 65535, 65536, 1 << 20,
                1000000, (1 << 30) - 1, 1 << 30, Integer.MAX_VALUE - 1, Integer.MAX_VALUE};
        for (long k : keys) for (int n : counts) line(out, k, n);
        // Pairs where the paper's C++ arithmetic, (b+1) * (2^31 / ((state>>>33)+1)) in 64 bits,
        // gives another bucket than Guava's (found by a search over 5*10^7 random pairs).
        long[][] differ = {{0xe6be4083168f1eeaL, 1167575017}, {0x5c5bc4e6d7bb2c68L, 1011146622},
                {0x5cb6662483ec6e78L, 2024071792}, {0x5f0b9da19b7a7538L, 1149975318},
                {0xa0b11bb130483db6L, 644359203}, {0x6282cfa03bab8a9fL, 1032065293},
                {0x88d46eeaed602b86L, 385012480}};
        for (long[] p : differ) line(out, p[0], (int) p[1]);
        for (int i = 0; i < 100; i++) {
            long k = r.nextLong();
            for (int n : counts) line(out, k, n);
        }
        for (int i = 0; i < 3000; i++) {
            long k = r.nextLong();
            int n;
            switch (i % 3) {
                case 0: n = 1 + r.nextInt(100); break;
                case 1: n = 1 + r.nextInt(100000); break;
                default: n = 1 + r.nextInt(Integer.MAX_VALUE); break;
            }
            line(out, k, n);
        }
        System.out.print(out);
    }

    static void line(StringBuilder out, long k, int n) {
        out.append(Long.toHexString(k)).append(' ').append(n).append(' ')
           .append(Hashing.consistentHash(k, n)).append('\n');
    }
}
