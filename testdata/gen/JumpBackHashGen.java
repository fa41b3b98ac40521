// JumpBackHashGen prints vectors of hash4j's JumpBackHash with its SplitMix64 generator,
// ConsistentHashing.jumpBackHashSplitMix64().getBucket(hash, n), for TestJumpBackHash4j:
//
//   h <hash as unsigned hex> <n> <bucket>   the function itself
//   k <key bytes in hex, "-" if empty> <n> <bucket>
//                                           a key placed as NewJumpBack places it: hash4j's
//                                           Hashing.xxh64() (seed 0) of the bytes, then getBucket
//   sum <pairs> <checksum>                  checksum of the buckets of that many pseudo-random
//                                           pairs (see main), after each power of ten
//
// hash4j is not on this machine's package mirrors; its source is (github.com/dynatrace-oss/
// hash4j, commit 41d814f, Apache 2.0). Compile only what the two entry points need, without
// its module-info.java, then run:
//
//   H=<hash4j checkout>; mkdir -p /tmp/h4j/src /tmp/h4j/classes
//   cp -r $H/src/main/java/com /tmp/h4j/src/
//   javac -nowarn -d /tmp/h4j/classes -sourcepath /tmp/h4j/src \
//     /tmp/h4j/src/com/dynatrace/hash4j/consistent/ConsistentHashing.java \
//     /tmp/h4j/src/com/dynatrace/hash4j/hashing/Hashing.java
//   java -cp /tmp/h4j/classes JumpBackHashGen.java > ../jumpback_hash4j.txt
import com.dynatrace.hash4j.consistent.ConsistentBucketHasher;
import com.dynatrace.hash4j.consistent.ConsistentHashing;
import com.dynatrace.hash4j.hashing.Hasher64;
import com.dynatrace.hash4j.hashing.Hashing;
import java.nio.charset.StandardCharsets;
import java.util.SplittableRandom;

public class JumpBackHashGen {
    static final ConsistentBucketHasher JB = ConsistentHashing.jumpBackHashSplitMix64();
    static final Hasher64 XXH64 = Hashing.xxh64();
    static final StringBuilder out = new StringBuilder();

    static void h(long hash, int n) {
        out.append("h ").append(Long.toHexString(hash)).append(' ').append(n).append(' ')
           .append(JB.getBucket(hash, n)).append('\n');
    }

    static void k(byte[] key, int n) {
        StringBuilder hex = new StringBuilder();
        for (byte b : key) hex.append(String.format("%02x", b & 0xff));
        out.append("k ").append(key.length == 0 ? "-" : hex).append(' ').append(n).append(' ')
           .append(JB.getBucket(XXH64.hashBytesToLong(key), n)).append('\n');
    }

    // buckets maps a random long to a count: a quarter each below 1000, below 10^6, below
    // 2^31, and within one of a power of two.
    static int buckets(long r) {
        long v = r >>> 2;
        switch ((int) (r & 3)) {
            case 0: return 1 + (int) (v % 1000);
            case 1: return 1 + (int) (v % 1000000);
            case 2: return 1 + (int) (v % Integer.MAX_VALUE);
            default: return (1 << (1 + (int) (v % 30))) - 1 + (int) ((v >>> 5) % 3);
        }
    }

    public static void main(String[] args) {
        int[] counts = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100,
                127, 128, 129, 1000, 1023, 1024, 1025, 65535, 65536, 65537, 100000, (1 << 20) - 1,
                1 << 20, 1000000, (1 << 30) - 1, 1 << 30, (1 << 30) + 1, Integer.MAX_VALUE - 2,
                Integer.MAX_VALUE - 1, Integer.MAX_VALUE};
        long[] hashes = {0, 1, -1, 2, Long.MIN_VALUE, Long.MAX_VALUE, 0xDEADBEEFL, 1L << 32,
                0xFFFFFFFFL, 0x9e3779b97f4a7c15L, -0x9e3779b97f4a7c15L};
        SplittableRandom r = new SplittableRandom(20240327);
        for (long hash : hashes) for (int n : counts) h(hash, n);
        for (int i = 0; i < 40; i++) {
            long hash = r.nextLong();
            for (int n : counts) h(hash, n);
        }
        for (int n = 1; n <= 300; n++) h(r.nextLong(), n);  // every small count
        for (int i = 0; i < 2000; i++) h(r.nextLong(), 1 + r.nextInt(1000000));
        for (int i = 0; i < 500; i++) h(r.nextLong(), Integer.MAX_VALUE - r.nextInt(1000));
        for (int i = 0; i < 500; i++) h(r.nextLong(), 1 + r.nextInt(Integer.MAX_VALUE));

        String[] special = {"", "\u0000", "a", "user:1000", "{user1000}.following", "\u65e5\u672c\u8a9e",
                "the quick brown fox jumps over the lazy dog, again and again and again"};
        int[] keyCounts = {1, 2, 3, 10, 11, 1000, 1000000, Integer.MAX_VALUE};
        for (String s : special) for (int n : keyCounts) k(s.getBytes(StandardCharsets.UTF_8), n);
        byte[] raw = {(byte) 0xff, (byte) 0xfe, 0, (byte) 0x80};
        for (int n : keyCounts) k(raw, n);
        for (int i = 0; i < 300; i++) {
            byte[] key = new byte[r.nextInt(40)];
            for (int j = 0; j < key.length; j++) key[j] = (byte) r.nextInt(256);
            k(key, keyCounts[i % keyCounts.length]);
        }

        // pairs: hash = r.nextLong(), n = buckets(r.nextLong()), sum = (sum ^ bucket) * FNV prime
        SplittableRandom p = new SplittableRandom(18);
        long sum = 0xcbf29ce484222325L;
        long next = 10;
        for (long i = 1; i <= 100_000_000L; i++) {
            long hash = p.nextLong();
            sum = (sum ^ JB.getBucket(hash, buckets(p.nextLong()))) * 0x100000001b3L;
            if (i == next) {
                out.append("sum ").append(i).append(' ').append(Long.toHexString(sum)).append('\n');
                next *= 10;
            }
        }
        System.out.print(out);
    }
}
