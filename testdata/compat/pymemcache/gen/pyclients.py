#!/usr/bin/python3
"""Writes the golden vectors of three Python memcached clients from Debian: pymemcache's
HashClient, uhashring's HashRing and python-memcache's Client.

    pyclients.py SYSTEM OUTDIR KEYS

SYSTEM is pymemcache, uhashring or python-memcache. For every configuration of that system
listed below, it writes OUTDIR/<name>.json (the configuration, as the preset reads it) and
OUTDIR/<name>.txt (the vectors, format of testdata/compat/README.md): it builds the real
client from the configuration, sets every key of KEYS through it (the value names the
configuration and the key), then asks every memcached server alone for every key and
records the one that holds it. It fails unless every key carried is on exactly one server,
the one the client's own lookup names. Keys the client refuses are listed as skipped, with
the client's exception.

The memcached servers must already run (gen.sh starts them, inside a private network
namespace): on 127.0.0.1 ports 21201-21210 and on 127.0.0.1-127.0.0.5 port 11211. This is
our own program; the clients are Debian's packages, imported from
/usr/lib/python3/dist-packages.
"""

import binascii
import json
import os
import socket
import subprocess
import sys

PORTS = list(range(21201, 21211))
LOOP = ["127.0.0.1:%d" % p for p in PORTS]  # the ten servers on 127.0.0.1
STD = ["127.0.0.%d" % i for i in range(1, 6)]  # five more, each on port 11211


def read_keys(path):
    keys = []
    for line in open(path):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        keys.append(b"" if line == "-" else binascii.unhexlify(line))
    return keys


def address(server):
    """The (host, port) a server string or pair stands for, as the clients read it."""
    if isinstance(server, (list, tuple)):
        return server[0], int(server[1])
    for prefix in ("inet:",):
        if server.startswith(prefix):
            server = server[len(prefix):]
    if ":" in server:
        host, port = server.rsplit(":", 1)
        return host, int(port)
    return server, 11211


class Memcached:
    """One memcached server asked directly, over the text protocol."""

    def __init__(self, host, port):
        self.addr = (socket.gethostbyname(host), port)
        self.sock = socket.create_connection(self.addr)
        self.buf = b""

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise IOError("memcached %s closed" % (self.addr,))
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exactly(self, n):
        while len(self.buf) < n:
            self.buf += self.sock.recv(65536)
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def get(self, key):
        self.sock.sendall(b"get " + key + b"\r\n")
        line = self._line()
        if line == b"END":
            return None
        parts = line.split(b" ")
        if parts[0] != b"VALUE" or parts[1] != key:
            raise IOError("memcached %s: get %r: %r" % (self.addr, key, line))
        value = self._exactly(int(parts[3]) + 2)[:-2]
        if self._line() != b"END":
            raise IOError("memcached %s: no END" % (self.addr,))
        return value

    def flush(self):
        self.sock.sendall(b"flush_all\r\n")
        if self._line() != b"OK":
            raise IOError("memcached %s: flush_all failed" % (self.addr,))


SERVERS = {}


def server(host, port):
    a = (socket.gethostbyname(host), port)
    if a not in SERVERS:
        SERVERS[a] = Memcached(host, port)
    return SERVERS[a]


# The configurations of each system: name -> (configuration as JSON, notes for the driver).

def pymemcache_configs():
    c = {}
    for n in (1, 2, 3, 5, 10):
        c["hash-%d" % n] = LOOP[:n]
    c["hash-5-pairs"] = [["127.0.0.1", p] for p in PORTS[:5]]
    c["hash-5-reordered"] = [LOOP[i] for i in (3, 0, 4, 2, 1)]
    c["hash-10-reordered"] = [LOOP[i] for i in (7, 2, 9, 0, 5, 3, 8, 1, 6, 4)]
    c["hash-3-localhost"] = ["localhost:%d" % p for p in PORTS[:3]]
    c["hash-5-default-port"] = STD  # no port: 11211
    c["hash-3-duplicate"] = [LOOP[0], LOOP[1], LOOP[0]]
    c["hash-5-ascii-only"] = {"servers": LOOP[:5], "allow_unicode_keys": False}
    for name, cfg in c.items():
        if isinstance(cfg, list):
            c[name] = {"servers": cfg, "allow_unicode_keys": True}
    c["hash-3-list"] = LOOP[:3]  # a bare list: HashClient's default, no unicode keys
    return c


def uhashring_configs():
    c = {}
    names = ["cache-a", "cache-b", "cache-c", "cache-d", "cache-e",
             "cache-f", "cache-g", "cache-h", "cache-i", "cache-j"]
    for n in (1, 2, 3, 5, 10):
        c["md5-%d" % n] = {"nodes": LOOP[:n]}
    c["md5-5-reordered"] = {"nodes": [LOOP[i] for i in (3, 0, 4, 2, 1)]}
    c["md5-5-names"] = {"nodes": {n: 1 for n in names[:5]}}
    c["md5-5-weights"] = {"nodes": {n: w for n, w in zip(names[:5], (1, 2, 3, 4, 5))}}
    c["md5-3-weight-0"] = {"nodes": {"cache-a": 1, "cache-b": 0, "cache-c": 2}}
    c["md5-4-node-conf"] = {"nodes": {
        "cache-a": {"weight": 2},
        "cache-b": {"vnodes": 40},
        "cache-c": {"weight": 3, "vnodes": 10},
        "cache-d": {"hostname": "127.0.0.1", "port": PORTS[3]},
    }}
    c["md5-5-vnodes-20"] = {"nodes": LOOP[:5], "vnodes": 20}
    c["md5-3-nodename"] = {"nodes": {
        "a": {"nodename": "cache-x"},
        "b": {"nodename": "cache-y", "weight": 2},
        "c": {},
    }}
    for n in (1, 2, 3, 5, 10):
        c["ketama-%d" % n] = {"nodes": LOOP[:n], "hash_fn": "ketama"}
    c["ketama-5-reordered"] = {"nodes": [LOOP[i] for i in (3, 0, 4, 2, 1)], "hash_fn": "ketama"}
    c["ketama-5-weights"] = {"nodes": {n: w for n, w in zip(names[:5], (1, 2, 3, 4, 5))}, "hash_fn": "ketama"}
    c["ketama-10-weights"] = {"nodes": {n: w for n, w in zip(names, (1, 2, 3, 5, 8, 13, 21, 34, 55, 89))}, "hash_fn": "ketama"}
    c["ketama-3-weight-0"] = {"nodes": {"cache-a": 1, "cache-b": 0, "cache-c": 2}, "hash_fn": "ketama"}
    c["ketama-5-vnodes-160"] = {"nodes": LOOP[:5], "hash_fn": "ketama", "vnodes": 160}
    for r in (1, 2, 3):
        c["ketama-5-replicas-%d" % r] = {"nodes": LOOP[:5], "hash_fn": "ketama", "replicas": r}
    c["ketama-4-node-conf"] = {"nodes": {
        "cache-a": {"weight": 2},
        "cache-b": {"vnodes": 80},
        "cache-c": {"weight": 3, "vnodes": 10},
        "cache-d": {},
    }, "hash_fn": "ketama"}
    return c


def python_memcache_configs():
    c = {}
    for n in (1, 2, 3, 5, 10):
        c["modula-%d" % n] = LOOP[:n]
    c["modula-5-reordered"] = [LOOP[i] for i in (3, 0, 4, 2, 1)]
    c["modula-5-weights"] = [[s, w] for s, w in zip(LOOP[:5], (1, 2, 3, 4, 5))]
    c["modula-3-weight-0"] = [[LOOP[0], 1], [LOOP[1], 0], [LOOP[2], 2]]
    c["modula-3-weights-big"] = [[LOOP[0], 100], [LOOP[1], 1], [LOOP[2], 37]]
    c["modula-3-duplicate"] = [LOOP[0], LOOP[1], LOOP[0]]
    c["modula-5-default-port"] = STD
    c["modula-3-inet"] = ["inet:" + s for s in LOOP[:3]]
    c["modula-10-weights-mixed"] = [LOOP[0], [LOOP[1], 3], LOOP[2], [LOOP[3], 2], LOOP[4],
                                    [LOOP[5], 1], LOOP[6], [LOOP[7], 5], LOOP[8], LOOP[9]]
    return c


# Configurations each client refuses, or cannot place a key with: name -> configuration.
REFUSED = {
    "pymemcache": {
        "no-servers": [],
        "bad-port": ["127.0.0.1:abc"],
        "triple": [["127.0.0.1", 21201, 1]],
        "hasher-argument": {"servers": LOOP[:2], "hasher": "RendezvousHash"},
    },
    "uhashring": {
        "no-nodes": {"nodes": []},
        "node-conf-string": {"nodes": {"cache-a": "1"}},
        "weight-float": {"nodes": {"cache-a": 1.5}},
        "ketama-replicas-5": {"nodes": LOOP[:2], "hash_fn": "ketama", "replicas": 5},
        "ketama-weights-0": {"nodes": {"cache-a": 0, "cache-b": 0}, "hash_fn": "ketama"},
        "hash-fn-other": {"nodes": LOOP[:2], "hash_fn": "md5"},
    },
    "python-memcache": {
        "no-servers": [],
        "bad-port": ["127.0.0.1:abc"],
        "weights-0": [[LOOP[0], 0], [LOOP[1], 0]],
        "weight-float": [[LOOP[0], 1.5]],
    },
}


def refuse(system, outdir):
    """Writes refused-<name>.json and .txt: what the client answered for each REFUSED one."""
    _, client, _ = SYSTEMS[system]
    for name, cfg in REFUSED[system].items():
        if system == "pymemcache" and isinstance(cfg, dict) and "hasher" in cfg:
            answer = "hasher must be a class with get_node, add_node and remove_node: JSON can only name it"
        else:
            try:
                _, _, put = client(cfg)
                node = put(b"user:1", b"x")
                answer = "set('user:1') went to %r" % (node,)
            except Exception as e:
                answer = "%s: %s" % (type(e).__name__, e)
        with open(os.path.join(outdir, "refused-%s.json" % name), "w") as f:
            json.dump(cfg, f, indent=1)
            f.write("\n")
        with open(os.path.join(outdir, "refused-%s.txt" % name), "w") as f:
            f.write("%s\n" % answer)
        print("%s: refused-%s: %s" % (system, name, answer))


# Drivers: build the client, return (server names as the preset returns them, in config
# order; the address of each; a function that sets a key and returns the name the client's
# own lookup gives, raising if the client refuses the key).

def pymemcache_client(cfg):
    from pymemcache.client.hash import HashClient
    if isinstance(cfg, list):
        servers, kwargs = cfg, {}
    else:
        servers = cfg["servers"]
        kwargs = {k: v for k, v in cfg.items() if k != "servers"}
    hc = HashClient([tuple(s) if isinstance(s, list) else s for s in servers],
                    default_noreply=False, **kwargs)
    names, addrs = [], []
    for s in servers:
        host, port = address(s)
        names.append("%s:%s" % (host, port))
        addrs.append((host, port))

    def put(key, value):
        k = key.decode("utf-8")
        if not hc.set(k, value, noreply=False):
            raise RuntimeError("set returned False")
        return hc.hasher.get_node(k)
    return names, addrs, put


def uhashring_client(cfg):
    from pymemcache.client.base import Client
    from uhashring import HashRing
    nodes = cfg["nodes"]
    kwargs = {k: v for k, v in cfg.items() if k != "nodes"}
    order = list(nodes)
    if isinstance(nodes, list):
        addrs = [address(n) for n in nodes]
        ring_nodes = nodes
    else:
        # Each node of a dict gets the next server on 127.0.0.1 as its instance.
        addrs = [("127.0.0.1", PORTS[i]) for i in range(len(order))]
        ring_nodes = {}
        for i, n in enumerate(order):
            conf = nodes[n]
            if isinstance(conf, int):
                conf = {"weight": conf}
            if isinstance(conf, dict):  # anything else goes to uhashring as it is
                conf = dict(conf)
                conf["instance"] = Client(addrs[i], allow_unicode_keys=True, default_noreply=False)
            ring_nodes[n] = conf
    ring = HashRing(ring_nodes, **kwargs)
    names = list(order)  # get_node answers the node's key in nodes, whatever its "nodename"
    clients = {}
    for i, n in enumerate(order):
        c = ring.runtime._nodes[n].get("instance") or Client(addrs[i], allow_unicode_keys=True, default_noreply=False)
        clients[names[i]] = c

    def put(key, value):
        k = key.decode("utf-8")
        name = ring.get_node(k)
        if name is None:
            raise RuntimeError("get_node returned None")
        inst = ring.get_node_instance(k) or clients[name]
        if not inst.set(k, value, noreply=False):
            raise RuntimeError("set returned False")
        return name
    return names, addrs, put


def python_memcache_client(cfg):
    import memcache
    servers = [tuple(s) if isinstance(s, list) else s for s in cfg]
    mc = memcache.Client(servers)
    names = [s[0] if isinstance(s, tuple) else s for s in servers]
    addrs = [address(n) for n in names]
    by_host = {id(h): names[i] for i, h in enumerate(mc.servers)}

    def put(key, value):
        k = key.decode("utf-8")
        host, _ = mc._get_server(k.encode("utf-8"))
        if host is None:
            raise RuntimeError("_get_server returned None: no bucket")
        if not mc.set(k, value):
            raise RuntimeError("set returned False")
        return by_host[id(host)]
    return names, addrs, put


SYSTEMS = {
    "pymemcache": (pymemcache_configs, pymemcache_client,
                   "HashClient.set(key) with the key as a str, to real memcached servers"),
    "uhashring": (uhashring_configs, uhashring_client,
                  "HashRing.get_node_instance(key) (a pymemcache Client per node), then set(key) on it, with the key as a str, to real memcached servers"),
    "python-memcache": (python_memcache_configs, python_memcache_client,
                        "Client.set(key) with the key as a str, to real memcached servers"),
}


def version():
    def deb(pkg):
        return subprocess.run(["dpkg-query", "-W", "-f", "${Version}", pkg],
                              capture_output=True, text=True).stdout
    return {
        "pymemcache": "pymemcache %s (Debian python3-pymemcache)" % deb("python3-pymemcache"),
        "uhashring": "uhashring %s (Debian python3-uhashring)" % deb("python3-uhashring"),
        "python-memcache": "python-memcached %s (Debian python3-memcache)" % deb("python3-memcache"),
    }, "Python %s, memcached %s" % (sys.version.split()[0], deb("memcached"))


def run(system, outdir, keys):
    configs, client, door = SYSTEMS[system]
    versions, rest = version()
    for name, cfg in configs().items():
        for s in SERVERS.values():
            s.flush()
        names, addrs, put = client(cfg)
        backends = [server(h, p) for h, p in addrs]
        skipped = {}
        said = {}
        for i, key in enumerate(keys):
            value = ("%s %s %d" % (system, name, i)).encode()
            try:
                said[i] = put(key, value)
            except Exception as e:  # the client refused the key: record why
                why = "%s: %s" % (type(e).__name__, str(e).split(" (key=")[0].split(":")[0])
                skipped.setdefault(why, []).append(i)
        lines = []
        for i in sorted(said):
            value = ("%s %s %d" % (system, name, i)).encode()
            holders = sorted({b.addr for b in backends if b.get(keys[i]) == value})
            if len(holders) != 1:
                sys.exit("%s %s: key %d held by %d servers" % (system, name, i, len(holders)))
            at = [j for j, b in enumerate(backends) if b.addr == holders[0]][0]
            if names[at] != said[i]:
                sys.exit("%s %s: key %d on %s, the client names %s" % (system, name, i, names[at], said[i]))
            lines.append("%d %d" % (i, at))
        with open(os.path.join(outdir, name + ".json"), "w") as f:
            json.dump(cfg, f, indent=1)
            f.write("\n")
        with open(os.path.join(outdir, name + ".txt"), "w") as f:
            f.write("# system: %s on %s, configuration %s.json\n" % (versions[system], rest, name))
            f.write("# front door: %s, then get on each server alone; each key found on exactly one server, the one the client's own lookup names\n" % door)
            f.write("# servers: %s\n" % " ".join("%d=%s" % (j, n) for j, n in enumerate(names)))
            for why, idx in sorted(skipped.items()):
                f.write("# skipped: %d keys, the client raised %s: %s\n" % (len(idx), why, " ".join(map(str, idx))))
            f.write("\n".join(lines) + "\n")
        print("%s: %s: %d keys carried, %d skipped" % (system, name, len(lines), sum(map(len, skipped.values()))))


if __name__ == "__main__":
    system, outdir, keyfile = sys.argv[1:4]
    run(system, outdir, read_keys(keyfile))
    refuse(system, outdir)
