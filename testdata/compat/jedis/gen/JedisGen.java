// JedisGen writes the Jedis sharded-pool compatibility vectors: for every configuration it
// builds a real ShardedJedis over live redis-server processes, SETs every key of keys.txt
// through it, then asks every backend for its KEYS and records which shard holds each key.
//
// It is compiled against a Jedis source checkout by gen.sh (see there); one source serves
// Jedis 2.9.x (package redis.clients.util) and 3.x (redis.clients.jedis.util) because the
// two classes that moved, Hashing and Sharded, are reached by reflection.
//
//   java JedisGen <jedis-version> <keys.txt> <out-dir> <prefix> <only-named> <port>...
import java.io.IOException;
import java.lang.reflect.Constructor;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HexFormat;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.regex.Pattern;

import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisShardInfo;
import redis.clients.jedis.ShardedJedis;

public class JedisGen {
  /** One JedisShardInfo as the config lists it; name null means unnamed. */
  record Shard(String name, int weight) {}

  /** One ShardedJedis configuration: file is the name of its .json and .txt. */
  record Config(String file, String hashing, String tag, List<Shard> shards) {}

  static final String CUSTOM_TAG = "^([^:]+):"; // everything before the first colon

  static List<Shard> unnamed(int n) {
    List<Shard> s = new ArrayList<>();
    for (int i = 0; i < n; i++) s.add(new Shard(null, 1));
    return s;
  }

  static List<Shard> named(String... names) {
    List<Shard> s = new ArrayList<>();
    for (String n : names) s.add(new Shard(n, 1));
    return s;
  }

  static List<Shard> weighted(Object... nameWeight) {
    List<Shard> s = new ArrayList<>();
    for (int i = 0; i < nameWeight.length; i += 2) {
      s.add(new Shard((String) nameWeight[i], (Integer) nameWeight[i + 1]));
    }
    return s;
  }

  static final String[] TEN = {"shard-07", "shard-02", "shard-09", "shard-00", "shard-04",
      "shard-01", "shard-08", "shard-03", "shard-06", "shard-05"};

  static final List<Config> CONFIGS = List.of(
      new Config("unnamed-1", "MURMUR_HASH", null, unnamed(1)),
      new Config("unnamed-2", "MURMUR_HASH", null, unnamed(2)),
      new Config("unnamed-3", "MURMUR_HASH", null, unnamed(3)),
      new Config("unnamed-5", "MURMUR_HASH", null, unnamed(5)),
      new Config("unnamed-10", "MURMUR_HASH", null, unnamed(10)),
      new Config("unnamed-3-md5", "MD5", null, unnamed(3)),
      new Config("unnamed-10-md5", "MD5", null, unnamed(10)),
      new Config("unnamed-5-weighted", "MURMUR_HASH", null,
          weighted(null, 1, null, 2, null, 3, null, 1, null, 5)),
      new Config("unnamed-5-weighted-md5", "MD5", null,
          weighted(null, 1, null, 2, null, 3, null, 1, null, 5)),
      new Config("unnamed-5-tag-default", "MURMUR_HASH", "default", unnamed(5)),
      new Config("unnamed-5-tag-default-md5", "MD5", "default", unnamed(5)),
      new Config("unnamed-5-tag-custom", "MURMUR_HASH", CUSTOM_TAG, unnamed(5)),
      new Config("named-1", "MURMUR_HASH", null, named("solo")),
      new Config("named-2", "MURMUR_HASH", null, named("shard1", "shard2")),
      new Config("named-3", "MURMUR_HASH", null, named("redis-a", "redis-b", "redis-c")),
      new Config("named-5-hostport-names", "MURMUR_HASH", null,
          named("10.0.0.5:6379", "10.0.0.1:6379", "10.0.0.3:6379", "10.0.0.2:6380", "10.0.0.4:6379")),
      new Config("named-10-unordered", "MURMUR_HASH", null, named(TEN)),
      new Config("named-10-unordered-md5", "MD5", null, named(TEN)),
      new Config("named-10-utf8-names", "MURMUR_HASH", null,
          named("01", "1", "Shard_B", "shard_b", "a.b.c", "redis://cache-3:6379/0", "ключ", "分片",
              "🙂", "long-" + "x".repeat(95))),
      new Config("named-5-weighted", "MURMUR_HASH", null,
          weighted("w1", 1, "w2", 2, "w5", 5, "w1b", 1, "w3", 3)),
      new Config("named-5-weighted-md5", "MD5", null,
          weighted("w1", 1, "w2", 2, "w5", 5, "w1b", 1, "w3", 3)),
      new Config("named-3-weighted-100", "MURMUR_HASH", null,
          weighted("small", 1, "big", 100, "mid", 10)),
      new Config("named-4-weight-0-and-max", "MURMUR_HASH", null,
          weighted("one", 1, "zero", 0, "max", Integer.MAX_VALUE, "two", 2)),
      new Config("named-3-duplicate-name", "MURMUR_HASH", null, named("dup", "dup", "other")),
      new Config("named-3-tag-default", "MURMUR_HASH", "default", named("redis-a", "redis-b", "redis-c")),
      new Config("named-3-tag-custom-md5", "MD5", CUSTOM_TAG, named("redis-a", "redis-b", "redis-c")),
      new Config("mixed-4-named-and-unnamed", "MURMUR_HASH", null,
          weighted("alpha", 1, null, 1, "gamma", 2, null, 1)));

  /** Configurations ShardedJedis accepts but cannot route any key with. */
  static final List<Config> REFUSALS = List.of(
      new Config("refused-no-shards", "MURMUR_HASH", null, List.of()),
      new Config("refused-all-weight-0", "MURMUR_HASH", null, weighted("a", 0, "b", 0)));

  public static void main(String[] args) throws Exception {
    String version = args[0];
    List<String> keys = readKeys(Paths.get(args[1]));
    Path out = Paths.get(args[2]);
    String prefix = args[3];
    boolean onlyNamed = Boolean.parseBoolean(args[4]);
    int[] ports = Arrays.stream(args, 5, args.length).mapToInt(Integer::parseInt).toArray();
    if (ports.length < 10) throw new IllegalArgumentException("need 10 live redis-server ports");
    boolean oldNaming = version.startsWith("2.") && !version.startsWith("2.10");
    String naming = oldNaming ? "name*weight+n (before 2.10)" : "name*n (2.10 and later)";
    String system = "Jedis " + version + " ShardedJedis, " + System.getProperty("redisVersion", "redis-server");

    for (Config c : CONFIGS) {
      boolean hasName = c.shards.stream().anyMatch(s -> s.name != null);
      if (onlyNamed && !hasName) continue;
      String file = prefix + c.file;
      Files.writeString(out.resolve(file + ".json"), configJSON(c, version, naming));
      int[] first = place(c, keys, ports, false);
      int[] second = place(c, keys, ports, true);
      if (!Arrays.equals(first, second)) {
        throw new IllegalStateException(file + ": placement changed when only the addresses changed");
      }
      Files.writeString(out.resolve(file + ".txt"), vectors(system, file, c, first));
      int[] count = new int[c.shards.size()];
      for (int s : first) count[s]++;
      System.out.println(file + ": " + keys.size() + " keys, per shard " + Arrays.toString(count));
    }
    if (onlyNamed) return;
    for (Config c : REFUSALS) {
      Files.writeString(out.resolve(prefix + c.file + ".json"), configJSON(c, version, naming));
      Set<String> msgs = new LinkedHashSet<>();
      int failed = 0;
      try (ShardedJedis sj = sharded(c, infos(c, ports, false))) {
        for (int i = 0; i < keys.size(); i++) {
          try {
            sj.set(keys.get(i), Integer.toString(i));
          } catch (RuntimeException e) {
            failed++;
            msgs.add(e.getClass().getName() + ": " + e.getMessage());
          }
        }
      }
      System.out.println(prefix + c.file + ": " + failed + " of " + keys.size() + " keys refused: " + msgs);
    }
  }

  /**
   * Sets every key through a ShardedJedis over c and returns, per key, the list index of the
   * shard whose backend holds it. Checks that each key is on exactly one backend, holds the
   * value written, and that Sharded.getShardInfo(key) names the same shard.
   */
  static int[] place(Config c, List<String> keys, int[] ports, boolean reversed) throws Exception {
    int n = c.shards.size();
    Jedis[] backends = new Jedis[n];
    for (int i = 0; i < n; i++) {
      backends[i] = new Jedis("127.0.0.1", ports[reversed ? n - 1 - i : i]);
      backends[i].flushAll();
    }
    int[] where = new int[keys.size()];
    Arrays.fill(where, -1);
    Map<String, Integer> index = new HashMap<>();
    HexFormat hex = HexFormat.of();
    List<JedisShardInfo> list = infos(c, ports, reversed);
    try (ShardedJedis sj = sharded(c, list)) {
      Method shardInfo = sj.getClass().getMethod("getShardInfo", String.class);
      for (int i = 0; i < keys.size(); i++) {
        String k = keys.get(i);
        sj.set(k, Integer.toString(i));
        index.put(hex.formatHex(k.getBytes(StandardCharsets.UTF_8)), i);
      }
      for (int s = 0; s < n; s++) {
        for (byte[] raw : backends[s].keys("*".getBytes(StandardCharsets.UTF_8))) {
          Integer i = index.get(hex.formatHex(raw));
          if (i == null) throw new IllegalStateException("backend " + s + " holds a key not in the set");
          if (where[i] != -1) throw new IllegalStateException("key " + i + " found on two backends");
          where[i] = s;
          byte[] v = backends[s].get(raw);
          if (!Integer.toString(i).equals(new String(v, StandardCharsets.UTF_8))) {
            throw new IllegalStateException("key " + i + " holds the wrong value");
          }
        }
      }
      for (int i = 0; i < keys.size(); i++) {
        if (where[i] == -1) throw new IllegalStateException("key " + i + " found on no backend");
        Object info = shardInfo.invoke(sj, keys.get(i));
        int s = indexOf(list, info);
        if (s != where[i]) {
          throw new IllegalStateException("key " + i + ": getShardInfo says " + s + ", KEYS found it on " + where[i]);
        }
      }
    } finally {
      for (Jedis b : backends) b.close();
    }
    return where;
  }

  static int indexOf(List<JedisShardInfo> list, Object info) {
    for (int i = 0; i < list.size(); i++) if (list.get(i) == info) return i;
    return -1;
  }

  /** The shard infos of c in config order: shard i on live port i (or n-1-i when reversed). */
  static List<JedisShardInfo> infos(Config c, int[] ports, boolean reversed) {
    int n = c.shards.size();
    List<JedisShardInfo> infos = new ArrayList<>();
    for (int i = 0; i < n; i++) {
      Shard s = c.shards.get(i);
      int port = ports[reversed ? n - 1 - i : i];
      infos.add(s.name == null
          ? new JedisShardInfo("127.0.0.1", port, 2000, 2000, s.weight)
          : new JedisShardInfo("127.0.0.1", s.name, port, 2000, s.weight));
    }
    return infos;
  }

  /** Builds the real ShardedJedis over infos with c's hashing and key-tag pattern. */
  static ShardedJedis sharded(Config c, List<JedisShardInfo> infos) throws Exception {
    Class<?> hashing = jedisClass("Hashing");
    Object algo = hashing.getField(c.hashing).get(null);
    Pattern tag = null;
    if ("default".equals(c.tag)) {
      tag = (Pattern) jedisClass("Sharded").getField("DEFAULT_KEY_TAG_PATTERN").get(null);
    } else if (c.tag != null) {
      tag = Pattern.compile(c.tag);
    }
    Constructor<ShardedJedis> ctor = ShardedJedis.class.getConstructor(List.class, hashing, Pattern.class);
    try {
      return ctor.newInstance(infos, algo, tag);
    } catch (InvocationTargetException e) {
      throw (Exception) e.getCause();
    }
  }

  /** A class of Jedis's util package, which moved from redis.clients.util in 3.0. */
  static Class<?> jedisClass(String name) throws ClassNotFoundException {
    try {
      return Class.forName("redis.clients.jedis.util." + name);
    } catch (ClassNotFoundException e) {
      return Class.forName("redis.clients.util." + name);
    }
  }

  static String tagPattern(Config c) throws Exception {
    if ("default".equals(c.tag)) {
      return ((Pattern) jedisClass("Sharded").getField("DEFAULT_KEY_TAG_PATTERN").get(null)).pattern();
    }
    return c.tag;
  }

  static String configJSON(Config c, String version, String naming) throws Exception {
    StringBuilder b = new StringBuilder("{\n");
    b.append("  \"jedis\": ").append(quote(version)).append(",\n");
    b.append("  \"naming\": ").append(quote(naming)).append(",\n");
    b.append("  \"hashing\": ").append(quote(c.hashing)).append(",\n");
    b.append("  \"keyTagPattern\": ").append(quote(tagPattern(c))).append(",\n");
    b.append("  \"shards\": [");
    for (int i = 0; i < c.shards.size(); i++) {
      Shard s = c.shards.get(i);
      b.append(i == 0 ? "\n" : ",\n");
      b.append("    {\"host\": \"10.0.0.").append(i + 1).append("\", \"port\": 6379, \"name\": ")
          .append(quote(s.name)).append(", \"weight\": ").append(s.weight).append("}");
    }
    b.append(c.shards.isEmpty() ? "]\n}\n" : "\n  ]\n}\n");
    return b.toString();
  }

  static String quote(String s) {
    if (s == null) return "null";
    StringBuilder b = new StringBuilder("\"");
    for (char ch : s.toCharArray()) {
      switch (ch) {
        case '"' -> b.append("\\\"");
        case '\\' -> b.append("\\\\");
        default -> {
          if (ch < 0x20) b.append(String.format("\\u%04x", (int) ch));
          else b.append(ch);
        }
      }
    }
    return b.append('"').toString();
  }

  static String vectors(String system, String file, Config c, int[] where) {
    StringBuilder b = new StringBuilder();
    b.append("# system: ").append(system).append(", ").append(file).append(".json\n");
    b.append("# front door: SET through ShardedJedis, then KEYS * on every backend; each key found on exactly one\n");
    b.append("# servers:");
    for (int i = 0; i < c.shards.size(); i++) {
      Shard s = c.shards.get(i);
      b.append(' ').append(i).append('=').append(s.name != null ? s.name : "10.0.0." + (i + 1) + ":6379");
    }
    b.append("\n# keys: ").append(where.length).append(" of ").append(where.length).append(" carried\n");
    for (int i = 0; i < where.length; i++) b.append(i).append(' ').append(where[i]).append('\n');
    return b.toString();
  }

  /** Reads keys.txt: one key per line in hex, "-" for the empty key, # comments. */
  static List<String> readKeys(Path path) throws IOException {
    List<String> keys = new ArrayList<>();
    HexFormat hex = HexFormat.of();
    for (String line : Files.readAllLines(path)) {
      line = line.strip();
      if (line.isEmpty() || line.startsWith("#")) continue;
      byte[] raw = line.equals("-") ? new byte[0] : hex.parseHex(line);
      String k = new String(raw, StandardCharsets.UTF_8);
      if (!Arrays.equals(k.getBytes(StandardCharsets.UTF_8), raw)) {
        throw new IllegalStateException("key " + keys.size() + " is not valid UTF-8; Jedis's String API cannot carry it");
      }
      keys.add(k);
    }
    return keys;
  }
}
