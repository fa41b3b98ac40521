// FirstByteSHA1Gen prints the shard of each key for 1..10 shards by the two-algorithms post's
// [000] "simple" rule. It reads one key per line as "x" followed by the key's bytes in hex,
// and writes "x<hex> s1 s2 ... s10". Run with: java FirstByteSHA1Gen.java < keys > vectors
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.util.Arrays;

public class FirstByteSHA1Gen {
    // shard is the rule exactly as the two-algorithms post [000] writes it, with the key's
    // bytes given.
    static int shard(byte[] key, int shardsCount) throws Exception {
        if (shardsCount < 1) throw new Exception("invalid shards count");
        byte[] bb = MessageDigest.getInstance("SHA-1").digest(key);
        int n = Math.abs((int) bb[0]);
        if (n >= 10) n = n % 10;
        double delimiter = (double) 10 / shardsCount;
        return (int) (n / delimiter);
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        StringBuilder out = new StringBuilder();
        for (String line; (line = in.readLine()) != null; ) {
            byte[] key = unhex(line.substring(1));
            // For valid UTF-8, key.getBytes("UTF-8") of the decoded String is the same bytes.
            try {
                String s = StandardCharsets.UTF_8.newDecoder()
                        .onMalformedInput(CodingErrorAction.REPORT)
                        .onUnmappableCharacter(CodingErrorAction.REPORT)
                        .decode(ByteBuffer.wrap(key)).toString();
                if (!Arrays.equals(s.getBytes("UTF-8"), key)) throw new AssertionError(line);
            } catch (CharacterCodingException e) {
                // invalid UTF-8: only the raw bytes are meaningful
            }
            out.append(line);
            for (int n = 1; n <= 10; n++) out.append(' ').append(shard(key, n));
            out.append('\n');
        }
        System.out.print(out);
    }

    static byte[] unhex(String h) {
        byte[] b = new byte[h.length() / 2];
        for (int i = 0; i < b.length; i++) b[i] = (byte) Integer.parseInt(h.substring(2 * i, 2 * i + 2), 16);
        return b;
    }
}
