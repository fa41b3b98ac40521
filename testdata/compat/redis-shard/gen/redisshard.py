#!/usr/bin/python3
"""Writes the golden vectors of redis-shard's RedisShardAPI.

    redisshard.py OUTDIR KEYS

redis-shard itself must be importable (gen.sh puts a checkout of its source on PYTHONPATH;
it is not on any registry this machine reaches, and it is not copied here). For every
configuration below it writes OUTDIR/<name>.json (RedisShardAPI's arguments, plus "keys":
how the application passes keys, str or bytes) and OUTDIR/<name>.txt (the vectors, format of
testdata/compat/README.md): it builds RedisShardAPI(servers, hash_method=...), SETs every key
of KEYS through it (the value names the configuration and the key), then asks every
redis-server alone for every key and records the one that holds it. It fails unless every
key carried is on exactly one server, the one get_server_name names. Keys the client
refuses are listed as skipped, with the exception. Our own program.
"""

import binascii
import json
import os
import subprocess
import sys

import redis
import redis_shard
from redis_shard.shard import RedisShardAPI

PORTS = list(range(22101, 22111))


def read_keys(path):
    keys = []
    for line in open(path):
        line = line.strip()
        if line and not line.startswith("#"):
            keys.append(b"" if line == "-" else binascii.unhexlify(line))
    return keys


def url(i, name):
    return "redis://127.0.0.1:%d/0?name=%s" % (PORTS[i], name)


def configs():
    c = {}
    for n in (1, 2, 3, 5, 10):
        c["crc32-%d" % n] = {"servers": [url(i, "node%d" % (i + 1)) for i in range(n)]}
    c["crc32-5-reordered"] = {"servers": [url(i, "node%d" % (i + 1)) for i in (3, 0, 4, 2, 1)]}
    c["crc32-3-names"] = {"servers": [url(0, "cache-a"), url(1, "b"), url(2, "10.0.0.3:6379")]}
    c["crc32-10-bytes"] = {"servers": c["crc32-10"]["servers"], "keys": "bytes"}
    for hm in ("md5", "sha1"):
        for n in (3, 10):
            c["%s-%d" % (hm, n)] = {"servers": [url(i, "node%d" % (i + 1)) for i in range(n)], "hash_method": hm}
        c["%s-5-bytes" % hm] = {"servers": [url(i, "node%d" % (i + 1)) for i in range(5)], "hash_method": hm, "keys": "bytes"}
    c["crc32-3-default"] = {"servers": [url(i, "node%d" % (i + 1)) for i in range(3)], "hash_method": "crc32"}
    return c


REFUSED = {
    "dict-servers": {"servers": [{"name": "node1", "host": "127.0.0.1", "port": PORTS[0], "db": 0}]},
    "no-name": {"servers": ["redis://127.0.0.1:%d/0" % PORTS[0]]},
    "same-name": {"servers": [url(0, "node1"), url(1, "node1")]},
    "hash-method-other": {"servers": [url(0, "node1")], "hash_method": "fnv"},
    "no-servers": {"servers": []},
}


def api_of(cfg):
    kw = {k: v for k, v in cfg.items() if k not in ("servers", "keys")}
    return RedisShardAPI(cfg["servers"], **kw)


def names_of(cfg):
    return [s.split("name=")[1] for s in cfg["servers"]]


def main(outdir, keyfile):
    keys = read_keys(keyfile)
    direct = [redis.Redis(host="127.0.0.1", port=p) for p in PORTS]
    redis_v = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "redis-server"], capture_output=True, text=True).stdout
    pyredis = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "python3-redis"], capture_output=True, text=True).stdout
    head = subprocess.run(["git", "-C", os.path.dirname(os.path.dirname(redis_shard.__file__)), "rev-parse", "HEAD"],
                          capture_output=True, text=True).stdout.strip() or "?"
    system = "redis-shard %s (github.com/zhihu/redis-shard at %s) on Python %s, python3-redis %s, redis-server %s" % (
        redis_shard.__version__, head, sys.version.split()[0], pyredis, redis_v)
    for name, cfg in configs().items():
        for d in direct:
            d.flushall()
        api = api_of(cfg)
        names = names_of(cfg)
        ports = [int(s.split(":")[2].split("/")[0]) for s in cfg["servers"]]
        as_bytes = cfg.get("keys") == "bytes"
        said, skipped = {}, {}
        for i, key in enumerate(keys):
            k = key if as_bytes else key.decode("utf-8")
            value = "%s %d" % (name, i)
            try:
                api.set(k, value)
                said[i] = api.get_server_name(k)
            except Exception as e:
                why = "%s: %s" % (type(e).__name__, str(e).split(":")[0])
                if isinstance(e, UnicodeEncodeError):  # b() encodes a str key (or its tag) as Latin-1
                    why = "UnicodeEncodeError: 'latin-1' codec can't encode a character above U+00FF"
                skipped.setdefault(why, []).append(i)
        lines = []
        for i in sorted(said):
            holders = [j for j, p in enumerate(ports) if direct[PORTS.index(p)].get(keys[i]) == ("%s %d" % (name, i)).encode()]
            if len(holders) != 1:
                sys.exit("%s: key %d held by %d servers" % (name, i, len(holders)))
            if names[holders[0]] != said[i]:
                sys.exit("%s: key %d on %s, get_server_name says %s" % (name, i, names[holders[0]], said[i]))
            lines.append("%d %d" % (i, holders[0]))
        with open(os.path.join(outdir, name + ".json"), "w") as f:
            json.dump(cfg, f, indent=1)
            f.write("\n")
        with open(os.path.join(outdir, name + ".txt"), "w") as f:
            f.write("# system: %s, configuration %s.json\n" % (system, name))
            f.write("# front door: RedisShardAPI.set(key) with the key as a %s, to real redis-server processes, then GET on each server alone; each key found on exactly one server, the one get_server_name names\n" % ("bytes" if as_bytes else "str"))
            f.write("# servers: %s\n" % " ".join("%d=%s" % (j, n) for j, n in enumerate(names)))
            for why, idx in sorted(skipped.items()):
                f.write("# skipped: %d keys, the client raised %s: %s\n" % (len(idx), why, " ".join(map(str, idx))))
            f.write("\n".join(lines) + "\n")
        print("redis-shard: %s: %d keys carried, %d skipped" % (name, len(lines), sum(map(len, skipped.values()))))
    for name, cfg in REFUSED.items():
        try:
            api = api_of(cfg)
            answer = "get_server_name('user:1') = %r" % (api.get_server_name("user:1"),)
        except Exception as e:
            answer = "%s: %s" % (type(e).__name__, e)
        with open(os.path.join(outdir, "refused-%s.json" % name), "w") as f:
            json.dump(cfg, f, indent=1)
            f.write("\n")
        with open(os.path.join(outdir, "refused-%s.txt" % name), "w") as f:
            f.write(answer + "\n")
        print("redis-shard: refused-%s: %s" % (name, answer))


if __name__ == "__main__":
    main(*sys.argv[1:3])
