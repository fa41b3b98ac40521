// JumpGuavaSums checks Guava's Hashing.consistentHash(long, int) on many pseudo-random
// (key, buckets) pairs at once: it prints, after each power of ten of pairs, a checksum of
// every bucket so far. The pairs and the checksum are defined so that Go can recompute
// them (see TestJumpHashGuavaSums). Run with:
//   java -cp /usr/share/java/guava.jar JumpGuavaSums.java > ../jump_guava_sums.txt
import com.google.common.hash.Hashing;
import java.util.SplittableRandom;

public class JumpGuavaSums {
    // buckets maps a random long to a bucket count: a quarter each below 1000, up to 2^18
    // (where the Go fast path changes), within 16 of 2^18, and up to 2^31-1.
    static int buckets(long r) {
        long v = r >>> 2;
        switch ((int) (r & 3)) {
            case 0: return 1 + (int) (v % 1000);
            case 1: return 1 + (int) (v % (1 << 18));
            case 2: return (1 << 18) - 16 + (int) (v % 32);
            default: return 1 + (int) (v % Integer.MAX_VALUE);
        }
    }

    public static void main(String[] args) {
        SplittableRandom r = new SplittableRandom(20240327);
        long sum = 0xcbf29ce484222325L; // FNV-1a offset basis, then one step per bucket
        long next = 10;
        System.out.println("# pairs checksum: key = next long, buckets from the next long; sum = (sum ^ bucket) * 0x100000001b3");
        for (long i = 1; i <= 100_000_000L; i++) {
            long key = r.nextLong();
            int n = buckets(r.nextLong());
            sum = (sum ^ Hashing.consistentHash(key, n)) * 0x100000001b3L;
            if (i == next) {
                System.out.println(i + " " + Long.toHexString(sum));
                next *= 10;
            }
        }
    }
}
