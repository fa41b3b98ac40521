// Gen.java: the Apache Kafka Java producer's placement of keyed records over the key set, for
// testdata/compat/kafka.
//
// For every key of keys.txt and every partition count it asks:
//   - BuiltInPartitioner.partitionForKey(keyBytes, n), which KafkaProducer.partition calls for
//     a record with a key when partitioner.class is not set (KafkaProducer.java), for every count;
//   - for the counts up to 1000, the Partitioner interface's partition(topic, key, keyBytes, value,
//     valueBytes, cluster) of the DefaultPartitioner (partitioner.class's old default, still
//     shipped), over a Cluster of n partitions, as KafkaProducer calls a configured partitioner;
// and fails unless both agree. It writes java-default.txt.
//
// Usage: java -cp CLASSES Gen KEYS_TXT OUT_DIR VERSION_TEXT
import java.io.BufferedReader;
import java.io.FileReader;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.HexFormat;
import java.util.List;
import java.util.Set;

import org.apache.kafka.clients.producer.internals.BuiltInPartitioner;
import org.apache.kafka.clients.producer.internals.DefaultPartitioner;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.Node;
import org.apache.kafka.common.PartitionInfo;

public class Gen {
    static final int[] COUNTS = {1, 2, 3, 7, 12, 64, 1000, 2147483647};
    static final int LIVE = 1000; // the largest count a Cluster is built for

    @SuppressWarnings("deprecation")
    public static void main(String[] args) throws Exception {
        if (args.length != 3) throw new IllegalArgumentException("usage: Gen KEYS_TXT OUT_DIR VERSION_TEXT");
        List<byte[]> keys = new ArrayList<>();
        try (BufferedReader r = new BufferedReader(new FileReader(args[0]))) {
            for (String line; (line = r.readLine()) != null; ) {
                if (line.isEmpty() || line.startsWith("#")) continue;
                keys.add(line.equals("-") ? new byte[0] : HexFormat.of().parseHex(line));
            }
        }
        int[][] placed = new int[keys.size()][COUNTS.length];
        int compared = 0;
        for (int c = 0; c < COUNTS.length; c++) {
            int n = COUNTS[c];
            DefaultPartitioner partitioner = null;
            Cluster cluster = null;
            if (n <= LIVE) {
                Node node = new Node(0, "127.0.0.1", 9092);
                Node[] nodes = {node};
                List<PartitionInfo> parts = new ArrayList<>();
                for (int p = 0; p < n; p++) parts.add(new PartitionInfo("t", p, node, nodes, nodes));
                cluster = new Cluster("gen", List.of(node), parts, Set.of(), Set.of());
                partitioner = new DefaultPartitioner();
            }
            for (int k = 0; k < keys.size(); k++) {
                int p = BuiltInPartitioner.partitionForKey(keys.get(k), n);
                if (p < 0 || p >= n) throw new IllegalStateException("partition out of range");
                placed[k][c] = p;
                if (partitioner != null) {
                    int sent = partitioner.partition("t", keys.get(k), keys.get(k), null, null, cluster);
                    if (sent != p)
                        throw new IllegalStateException("key " + k + ", " + n + " partitions: sent to " + sent
                                + ", partitionForKey says " + p);
                    compared++;
                }
            }
        }
        System.err.println("gen: java: " + keys.size() * COUNTS.length + " placements, " + compared
                + " of them also through DefaultPartitioner.partition");
        try (PrintWriter w = new PrintWriter(args[1] + "/java-default.txt", "UTF-8")) {
            w.print("# system: " + args[2] + ", the built-in partitioner (partitioner.class not set)\n");
            w.print("# front door: BuiltInPartitioner.partitionForKey for every count; for counts up to " + LIVE
                    + " also DefaultPartitioner.partition over a Cluster of that many partitions\n");
            w.print("# partitions:");
            for (int n : COUNTS) w.print(" " + n);
            w.print("\n# null key: not placed by key: the sticky partition of the batch (random)\n");
            for (int k = 0; k < keys.size(); k++) {
                w.print(k);
                for (int p : placed[k]) w.print(" " + p);
                w.print("\n");
            }
        }
    }
}
