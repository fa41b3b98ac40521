/*
 * SpyVec: golden placement vectors from the real spymemcached (Debian libspymemcached-java 2.12.3).
 *
 *   java SpyVec vectors SYSTEM KEYS CONF   writes the vector file of CONF to stdout
 *   java SpyVec refuse CONF                builds the client of CONF and prints what
 *                                          spymemcached answers (or throws)
 *
 * A .conf file holds key=value lines (# starts a comment):
 *
 *   servers=LIST     the string given to AddrUtil.getAddresses
 *   addresses=LIST   instead of servers: host/ip:port entries (split at white space and commas),
 *                    each made into new InetSocketAddress(InetAddress.getByAddress(host, ip),
 *                    port): the host name is kept as given, and nothing is looked up
 *   locator=CONSISTENT | ARRAY_MOD
 *   hash=NAME        a DefaultHashAlgorithm constant
 *   format=SPYMEMCACHED | LIBMEMCACHED   the KetamaNodeKeyFormatter format (CONSISTENT only)
 *   weights=W W ...  one weight per server in list order, given to KetamaConnectionFactory
 *                    as its Map<InetSocketAddress, Integer> (CONSISTENT only)
 *   factory=ketama | builder   CONSISTENT through KetamaConnectionFactory (the default, the
 *                    only one that takes a format and weights) or ConnectionFactoryBuilder
 *                    with Locator.CONSISTENT; ARRAY_MOD always uses ConnectionFactoryBuilder
 *
 * The front door: every key spymemcached accepts is stored with MemcachedClient.set through
 * the configured client (text protocol, or the binary protocol for keys with a space, which
 * the text protocol refuses), then every memcached server is read on its own (a one-server
 * binary client) to find the one server holding the key with this configuration's value;
 * the client's own NodeLocator.getPrimary must name that server, or SpyVec fails. Keys
 * spymemcached refuses in both protocols (empty, over 250 UTF-8 bytes) are placed with
 * getPrimary and listed in the header.
 */
import java.lang.reflect.Field;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.IdentityHashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import net.spy.memcached.AddrUtil;
import net.spy.memcached.BinaryConnectionFactory;
import net.spy.memcached.ConnectionFactory;
import net.spy.memcached.ConnectionFactoryBuilder;
import net.spy.memcached.DefaultHashAlgorithm;
import net.spy.memcached.KetamaConnectionFactory;
import net.spy.memcached.KetamaNodeKeyFormatter;
import net.spy.memcached.KetamaNodeLocator;
import net.spy.memcached.MemcachedClient;
import net.spy.memcached.MemcachedConnection;
import net.spy.memcached.MemcachedNode;
import net.spy.memcached.NodeLocator;
import net.spy.memcached.OperationFactory;
import net.spy.memcached.protocol.binary.BinaryMemcachedNodeImpl;
import net.spy.memcached.protocol.binary.BinaryOperationFactory;

public class SpyVec {
  /** KetamaConnectionFactory over the binary protocol, as BinaryConnectionFactory does it. */
  static final class BinaryKetamaConnectionFactory extends KetamaConnectionFactory {
    BinaryKetamaConnectionFactory(DefaultHashAlgorithm hash, KetamaNodeKeyFormatter.Format format,
        Map<InetSocketAddress, Integer> weights) {
      super(DEFAULT_OP_QUEUE_LEN, DEFAULT_READ_BUFFER_SIZE, DEFAULT_OP_QUEUE_MAX_BLOCK_TIME, hash,
          format, weights);
    }

    @Override
    public MemcachedNode createMemcachedNode(java.net.SocketAddress sa,
        java.nio.channels.SocketChannel c, int bufSize) {
      return new BinaryMemcachedNodeImpl(sa, c, bufSize, createReadOperationQueue(),
          createWriteOperationQueue(), createOperationQueue(), getOpQueueMaxBlockTime(), false,
          getOperationTimeout(), getAuthWaitTime(), this);
    }

    @Override
    public OperationFactory getOperationFactory() {
      return new BinaryOperationFactory();
    }
  }

  static final class Config {
    final Map<String, String> values = new LinkedHashMap<>();

    Config(Path path) throws Exception {
      for (String raw : Files.readAllLines(path, StandardCharsets.UTF_8)) {
        String line = raw.trim();
        if (line.isEmpty() || line.startsWith("#")) continue;
        int eq = line.indexOf('=');
        if (eq < 0) throw new IllegalArgumentException(path + ": no '=' in: " + line);
        values.put(line.substring(0, eq).trim(), line.substring(eq + 1).trim());
      }
    }

    String get(String key, String fallback) {
      return values.getOrDefault(key, fallback);
    }

    /** Server names as written in the list, in the order AddrUtil reads them. */
    List<String> names() {
      List<String> out = new ArrayList<>();
      String key = values.containsKey("addresses") ? "addresses" : "servers";
      for (String s : get(key, "").split("(?:\\s|,)+")) {
        if (!s.isEmpty()) out.add(s);
      }
      return out;
    }

    /**
     * The socket addresses: AddrUtil's reading of servers=, or the host/ip:port entries of
     * addresses=, each an InetAddress.getByAddress(host, ip) (the ip a literal, read without a
     * lookup) with its port.
     */
    List<InetSocketAddress> addrs() throws Exception {
      if (!values.containsKey("addresses")) return AddrUtil.getAddresses(get("servers", ""));
      List<InetSocketAddress> out = new ArrayList<>();
      for (String entry : names()) {
        int slash = entry.indexOf('/'), colon = entry.lastIndexOf(':');
        String ip = entry.substring(slash + 1, colon);
        if (ip.startsWith("[") && ip.endsWith("]")) ip = ip.substring(1, ip.length() - 1);
        byte[] raw = InetAddress.getByName(ip).getAddress();
        InetAddress addr = InetAddress.getByAddress(entry.substring(0, slash), raw);
        out.add(new InetSocketAddress(addr, Integer.parseInt(entry.substring(colon + 1))));
      }
      return out;
    }

    ConnectionFactory factory(List<InetSocketAddress> addrs, boolean binary) {
      DefaultHashAlgorithm hash = DefaultHashAlgorithm.valueOf(get("hash", "NATIVE_HASH"));
      String locator = get("locator", "ARRAY_MOD");
      if (locator.equals("CONSISTENT") && get("factory", "ketama").equals("ketama")) {
        KetamaNodeKeyFormatter.Format format =
            KetamaNodeKeyFormatter.Format.valueOf(get("format", "SPYMEMCACHED"));
        Map<InetSocketAddress, Integer> weights = new HashMap<>();
        String w = get("weights", "");
        if (!w.isEmpty()) {
          String[] ws = w.split("\\s+");
          for (int i = 0; i < ws.length; i++) weights.put(addrs.get(i), Integer.parseInt(ws[i]));
        }
        if (binary) return new BinaryKetamaConnectionFactory(hash, format, weights);
        return new KetamaConnectionFactory(KetamaConnectionFactory.DEFAULT_OP_QUEUE_LEN,
            KetamaConnectionFactory.DEFAULT_READ_BUFFER_SIZE,
            KetamaConnectionFactory.DEFAULT_OP_QUEUE_MAX_BLOCK_TIME, hash, format, weights);
      }
      return new ConnectionFactoryBuilder()
          .setLocatorType(ConnectionFactoryBuilder.Locator.valueOf(locator))
          .setHashAlg(hash)
          .setProtocol(binary ? ConnectionFactoryBuilder.Protocol.BINARY
                              : ConnectionFactoryBuilder.Protocol.TEXT)
          .build();
    }
  }

  static Object field(Object o, String name) throws Exception {
    for (Class<?> c = o.getClass(); c != null; c = c.getSuperclass()) {
      try {
        Field f = c.getDeclaredField(name);
        f.setAccessible(true);
        return f.get(o);
      } catch (NoSuchFieldException e) {
        // look in the superclass
      }
    }
    throw new NoSuchFieldException(name);
  }

  /** The client's own locator (getNodeLocator returns a copy whose nodes are wrappers). */
  static NodeLocator locatorOf(MemcachedClient client) throws Exception {
    MemcachedConnection conn = (MemcachedConnection) field(client, "mconn");
    return (NodeLocator) field(conn, "locator");
  }

  /**
   * waitConnected waits until every node is connected. Until then spymemcached's default
   * failure mode (Redistribute) sends an operation for a node not yet connected to another
   * node, which would store the key away from its placement.
   */
  static void waitConnected(MemcachedClient client) throws Exception {
    long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
    for (;;) {
      boolean all = true;
      for (MemcachedNode node : locatorOf(client).getAll()) all &= node.isActive();
      if (all) return;
      if (System.nanoTime() > deadline) throw new IllegalStateException("servers not connected");
      Thread.sleep(10);
    }
  }

  /** The names KetamaNodeKeyFormatter gave the nodes (what it hashed, before "-<i>"). */
  @SuppressWarnings("unchecked")
  static Map<MemcachedNode, String> pointNames(NodeLocator locator) throws Exception {
    if (!(locator instanceof KetamaNodeLocator)) return null;
    Object config = field(locator, "config");
    Object formatter = field(config, "ketamaNodeKeyFormatter");
    return (Map<MemcachedNode, String>) field(formatter, "nodeKeys");
  }

  static String hex(byte[] b) {
    StringBuilder sb = new StringBuilder();
    for (byte x : b) sb.append(String.format("%02x", x));
    return sb.toString();
  }

  static List<byte[]> readKeys(Path path) throws Exception {
    List<byte[]> keys = new ArrayList<>();
    for (String raw : Files.readAllLines(path, StandardCharsets.US_ASCII)) {
      String line = raw.trim();
      if (line.isEmpty() || line.startsWith("#")) continue;
      if (line.equals("-")) {
        keys.add(new byte[0]);
        continue;
      }
      byte[] b = new byte[line.length() / 2];
      for (int i = 0; i < b.length; i++) {
        b[i] = (byte) Integer.parseInt(line.substring(2 * i, 2 * i + 2), 16);
      }
      keys.add(b);
    }
    return keys;
  }

  static String list(List<Integer> xs) {
    StringBuilder sb = new StringBuilder();
    for (int x : xs) sb.append(sb.length() == 0 ? "" : " ").append(x);
    return sb.toString();
  }

  static int vectors(String system, Path keysPath, Path confPath) throws Exception {
    List<byte[]> keyBytes = readKeys(keysPath);
    Config cfg = new Config(confPath);
    List<String> names = cfg.names();
    List<InetSocketAddress> addrs = cfg.addrs();
    if (addrs.size() != names.size()) throw new IllegalStateException("server names do not match");
    MemcachedClient text = new MemcachedClient(cfg.factory(addrs, false), addrs);
    MemcachedClient bin = new MemcachedClient(cfg.factory(addrs, true), addrs);
    String base = confPath.getFileName().toString();
    String value = "spyvec " + base;
    try {
      waitConnected(text);
      waitConnected(bin);
      NodeLocator locText = locatorOf(text);
      NodeLocator locBin = locatorOf(bin);
      // Node -> configuration index, by identity, in the order the client made them.
      Map<MemcachedNode, Integer> index = new IdentityHashMap<>();
      Map<MemcachedNode, Integer> indexBin = new IdentityHashMap<>();
      List<MemcachedNode> all = new ArrayList<>(locText.getAll());
      List<MemcachedNode> allBin = new ArrayList<>(locBin.getAll());
      for (int i = 0; i < all.size(); i++) {
        index.put(all.get(i), i);
        indexBin.put(allBin.get(i), i);
        if (!all.get(i).getSocketAddress().equals(addrs.get(i))) {
          throw new IllegalStateException("node order differs from the list");
        }
      }

      // Physical servers: one per distinct socket address.
      List<InetSocketAddress> phys = new ArrayList<>();
      Map<Integer, Integer> physOf = new HashMap<>();
      boolean[] dupPhys = new boolean[addrs.size()];
      for (int i = 0; i < addrs.size(); i++) {
        int q = phys.indexOf(addrs.get(i));
        if (q < 0) {
          phys.add(addrs.get(i));
          q = phys.size() - 1;
        } else {
          dupPhys[q] = true;
        }
        physOf.put(i, q);
      }

      int n = keyBytes.size();
      int[] result = new int[n];
      boolean[] carried = new boolean[n];
      List<Integer> api = new ArrayList<>(), binary = new ArrayList<>(), ambiguous = new ArrayList<>();
      String refusedEmpty = "", refusedLong = "";
      for (int k = 0; k < n; k++) {
        byte[] b = keyBytes.get(k);
        String key = new String(b, StandardCharsets.UTF_8);
        if (!java.util.Arrays.equals(key.getBytes(StandardCharsets.UTF_8), b)) {
          throw new IllegalStateException("key " + k + " is not UTF-8");
        }
        Integer it = index.get(locText.getPrimary(key));
        Integer ib = indexBin.get(locBin.getPrimary(key));
        if (it == null || !it.equals(ib)) throw new IllegalStateException("key " + k + ": locators disagree");
        result[k] = it;
        boolean space = key.indexOf(' ') >= 0;
        MemcachedClient client = space ? bin : text;
        try {
          if (!client.set(key, 0, value).get(10, TimeUnit.SECONDS)) {
            throw new IllegalStateException("key " + k + ": set returned false");
          }
        } catch (IllegalArgumentException e) {
          if (b.length == 0) refusedEmpty = e.getClass().getName() + ": " + e.getMessage();
          else if (b.length > 250) refusedLong = e.getClass().getName() + ": " + e.getMessage();
          else throw new IllegalStateException("key " + k + " refused: " + e.getMessage());
          api.add(k);
          continue;
        }
        carried[k] = true;
        if (space) binary.add(k);
      }

      int[] found = new int[n], hits = new int[n];
      java.util.Arrays.fill(found, -1);
      for (int q = 0; q < phys.size(); q++) {
        List<InetSocketAddress> one = new ArrayList<>();
        one.add(phys.get(q));
        MemcachedClient reader = new MemcachedClient(new BinaryConnectionFactory(), one);
        try {
          waitConnected(reader);
          List<String> batch = new ArrayList<>();
          List<Integer> batchIndex = new ArrayList<>();
          for (int k = 0; k <= n; k++) {
            if (k < n && carried[k]) {
              batch.add(new String(keyBytes.get(k), StandardCharsets.UTF_8));
              batchIndex.add(k);
            }
            if (batch.size() == 500 || (k == n && !batch.isEmpty())) {
              Map<String, Object> got = reader.getBulk(batch);
              for (int j = 0; j < batch.size(); j++) {
                if (value.equals(got.get(batch.get(j)))) {
                  found[batchIndex.get(j)] = q;
                  hits[batchIndex.get(j)]++;
                }
              }
              batch.clear();
              batchIndex.clear();
            }
          }
        } finally {
          reader.shutdown(10, TimeUnit.SECONDS);
        }
      }
      for (int k = 0; k < n; k++) {
        if (!carried[k]) continue;
        if (hits[k] != 1) throw new IllegalStateException("key " + k + " found on " + hits[k] + " servers");
        if (found[k] != physOf.get(result[k])) {
          throw new IllegalStateException("key " + k + ": held by " + phys.get(found[k])
              + ", getPrimary says entry " + result[k]);
        }
        if (dupPhys[found[k]]) ambiguous.add(k);
      }

      StringBuilder out = new StringBuilder();
      out.append("# system: ").append(system).append(", configuration ").append(base).append('\n');
      out.append("# front door: MemcachedClient.set through the configured client to real memcached "
          + "servers, then get on each server alone; each key found on exactly one server, the one "
          + "the client's NodeLocator.getPrimary names\n");
      out.append("# servers:");
      for (int i = 0; i < names.size(); i++) out.append(' ').append(i).append('=').append(names.get(i));
      out.append('\n');
      Map<MemcachedNode, String> pn = pointNames(locText);
      if (pn != null) {
        out.append("# point names (KetamaNodeKeyFormatter, then \"-<i>\"):");
        for (int i = 0; i < all.size(); i++) {
          out.append(' ').append(i).append("=\"").append(pn.get(all.get(i))).append('"');
        }
        out.append('\n');
      }
      out.append("# keys: ").append(n).append(" = ").append(n - api.size())
          .append(" set through the client (").append(binary.size())
          .append(" of them over the binary protocol) + ").append(api.size())
          .append(" placed by NodeLocator.getPrimary\n");
      if (!binary.isEmpty()) {
        out.append("# binary protocol (").append(binary.size()).append(" keys): ").append(list(binary))
            .append("; keys with a space: the text protocol refuses them (\"Key contains invalid "
                + "characters\"), so they were set through a second client from the same "
                + "configuration over the binary protocol (the protocol does not change placement)\n");
      }
      if (!api.isEmpty()) {
        out.append("# api (").append(api.size()).append(" keys): ").append(list(api))
            .append("; MemcachedClient.set refuses them (empty key: \"").append(refusedEmpty)
            .append("\"; keys over 250 bytes: \"").append(refusedLong)
            .append("\"); placed by the client's NodeLocator.getPrimary\n");
      }
      if (!ambiguous.isEmpty()) {
        out.append("# duplicate entries (").append(ambiguous.size()).append(" keys): ")
            .append(list(ambiguous))
            .append("; held by a server listed more than once; the entry index is getPrimary's\n");
      }
      for (int k = 0; k < n; k++) out.append(k).append(' ').append(result[k]).append('\n');
      System.out.print(out);
      System.out.flush();
    } finally {
      text.shutdown(10, TimeUnit.SECONDS);
      bin.shutdown(10, TimeUnit.SECONDS);
    }
    return 0;
  }

  static int refuse(Path confPath) throws Exception {
    Config cfg = new Config(confPath);
    String servers = cfg.get("servers", "");
    System.out.println("AddrUtil.getAddresses(\"" + servers + "\")");
    List<InetSocketAddress> addrs;
    try {
      addrs = AddrUtil.getAddresses(servers);
    } catch (Exception e) {
      System.out.println("  -> " + e.getClass().getName() + ": " + e.getMessage());
      return 0;
    }
    System.out.println("  -> " + addrs);
    System.out.println("new MemcachedClient(factory, addresses)");
    MemcachedClient client;
    try {
      client = new MemcachedClient(cfg.factory(addrs, false), addrs);
    } catch (Exception e) {
      System.out.println("  -> " + e.getClass().getName() + ": " + e.getMessage());
      return 0;
    }
    try {
      NodeLocator loc = locatorOf(client);
      if (loc instanceof KetamaNodeLocator) {
        @SuppressWarnings("unchecked")
        TreeMap<Long, MemcachedNode> ring = (TreeMap<Long, MemcachedNode>) field(loc, "ketamaNodes");
        System.out.println("  -> a continuum of " + ring.size() + " points");
      } else {
        System.out.println("  -> " + loc.getClass().getSimpleName());
      }
      System.out.println("NodeLocator.getPrimary(\"user:1\")");
      try {
        System.out.println("  -> " + loc.getPrimary("user:1").getSocketAddress());
      } catch (Exception e) {
        System.out.println("  -> " + e.getClass().getName() + ": " + e.getMessage());
      }
      System.out.println("MemcachedClient.set(\"user:1\", 0, \"v\")");
      try {
        System.out.println("  -> " + client.set("user:1", 0, "v").get(10, TimeUnit.SECONDS));
      } catch (Exception e) {
        System.out.println("  -> " + e.getClass().getName() + ": " + e.getMessage());
      }
    } finally {
      client.shutdown(10, TimeUnit.SECONDS);
    }
    return 0;
  }

  public static void main(String[] args) throws Exception {
    int rc;
    if (args.length == 4 && args[0].equals("vectors")) {
      rc = vectors(args[1], Paths.get(args[2]), Paths.get(args[3]));
    } else if (args.length == 2 && args[0].equals("refuse")) {
      rc = refuse(Paths.get(args[1]));
    } else {
      System.err.println("usage: SpyVec vectors SYSTEM KEYS CONF | SpyVec refuse CONF");
      rc = 2;
    }
    System.exit(rc);
  }
}
