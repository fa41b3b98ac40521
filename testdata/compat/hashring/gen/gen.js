// gen.js writes the npm hashring compatibility vectors: for every configuration it builds a
// real HashRing (the version pinned in package.json / package-lock.json) and records
// ring.get(key) for every key of keys.txt. hashring is a library with no server behind it,
// so ring.get is its front door. Run by gen.sh:  node gen.js ../../keys.txt ..
'use strict';

const fs = require('fs');
const path = require('path');
const HashRing = require('hashring');

const [keysPath, outDir] = process.argv.slice(2);

// names returns n server strings in host:port form, 10.0.0.1:11211 and up.
const names = (n) => Array.from({ length: n }, (_, i) => `10.0.0.${i + 1}:11211`);
const ten = [7, 2, 9, 0, 4, 1, 8, 3, 6, 5].map((i) => `10.0.0.${i + 1}:11211`);

// Each config is exactly the three arguments of new HashRing(servers, algorithm, options).
const configs = [
  ['list-1', names(1)],
  ['list-2', names(2)],
  ['list-3', names(3)],
  ['list-5', names(5)],
  ['list-10-unordered', ten],
  // 1/7*40*7 is 39.99999999999999 in float64: with 7 equal servers each gets 39 vnodes, not 40.
  ['list-7-float-rounding', names(7)],
  ['list-3-hash_ring', names(3), null, { compatibility: 'hash_ring' }],
  ['list-10-hash_ring', ten, null, { compatibility: 'hash_ring' }],
  ['list-5-sha1', names(5), 'sha1'],
  ['list-5-sha256', names(5), 'sha256'],
  ['list-5-sha512', names(5), 'sha512'],
  ['list-5-sha256-hash_ring', names(5), 'sha256', { compatibility: 'hash_ring' }],
  ['list-5-vnode-count-1', names(5), null, { 'vnode count': 1 }],
  ['list-5-vnode-count-100', names(5), null, { 'vnode count': 100 }],
  ['list-3-replicas-1', names(3), null, { replicas: 1 }],
  ['list-3-replicas-2', names(3), null, { replicas: 2 }],
  ['list-3-replicas-0', names(3), null, { replicas: 0 }],
  // md5 has 16 bytes: the fifth point of every digest reads past it and becomes 0.
  ['list-3-replicas-5-md5', names(3), null, { replicas: 5 }],
  ['list-3-replicas-8-sha256', names(3), 'sha256', { replicas: 8 }],
  // compatibility wins over replicas, and any other compatibility value means 4.
  ['list-3-compat-other-replicas-2', names(3), null, { compatibility: 'ketama', replicas: 2 }],
  ['list-3-default-port', ['10.0.0.1:11211', '10.0.0.2:11212', '10.0.0.3:11211'], null,
    { 'default port': 11211 }],
  ['list-5-names-not-hostport', ['cache-a', 'cache-b:x', 'redis://cache-c:6379', 'ключ', '分片:1']],
  ['list-3-duplicate', ['10.0.0.1:11211', '10.0.0.1:11211', '10.0.0.2:11211']],
  ['object-3-equal', { '10.0.0.1:11211': 1, '10.0.0.2:11211': 1, '10.0.0.3:11211': 1 }],
  ['object-5-weighted', { '10.0.0.1:11211': 1, '10.0.0.2:11211': 2, '10.0.0.3:11211': 3,
    '10.0.0.4:11211': 1, '10.0.0.5:11211': 5 }],
  ['object-5-weighted-hash_ring', { '10.0.0.1:11211': 1, '10.0.0.2:11211': 2,
    '10.0.0.3:11211': 3, '10.0.0.4:11211': 1, '10.0.0.5:11211': 5 }, null,
    { compatibility: 'hash_ring' }],
  ['object-10-weighted-sha1', Object.fromEntries(ten.map((s, i) => [s, i + 1])), 'sha1'],
  ['object-3-weight-0-and-fraction', { '10.0.0.1:11211': 0, '10.0.0.2:11211': 2.5,
    '10.0.0.3:11211': 1 }],
  ['object-3-negative-weight', { '10.0.0.1:11211': 3, '10.0.0.2:11211': -1, '10.0.0.3:11211': 1 }],
  ['object-3-large-weight', { '10.0.0.1:11211': 1, '10.0.0.2:11211': 1000, '10.0.0.3:11211': 1 }],
  ['object-4-vnodes', { '10.0.0.1:11211': { weight: 1, vnodes: 100 }, '10.0.0.2:11211': { vnodes: 40 },
    '10.0.0.3:11211': { weight: 3 }, '10.0.0.4:11211': { weight: 2, vnodes: 10 } }],
  // A fractional per-server vnode count is used as the loop bound: 2.5 makes 3 vnodes.
  ['object-3-vnodes-fraction', { '10.0.0.1:11211': { vnodes: 2.5 }, '10.0.0.2:11211': { vnodes: 3 },
    '10.0.0.3:11211': 1 }],
  // Integer-like keys of a JS object are enumerated first, ascending: "2", "10", then "b".
  ['object-3-integer-names', { b: 1, 10: 2, 2: 3 }],
];

// Configs the real HashRing refuses, or accepts and then cannot place a key with.
const refusals = [
  ['refused-no-servers', []],
  ['refused-vnode-count-0', names(3), null, { 'vnode count': 0 }],
  ['refused-replicas-nan', names(3), null, { replicas: 'three' }],
  ['refused-unknown-algorithm', names(3), 'nosuchhash'],
  ['refused-server-object-with-weight', [{ host: '10.0.0.1', port: 11211, weight: 2 }]],
];

function readKeys(file) {
  const keys = [];
  for (let line of fs.readFileSync(file, 'utf8').split('\n')) {
    line = line.trim();
    if (line === '' || line.startsWith('#')) continue;
    const raw = line === '-' ? Buffer.alloc(0) : Buffer.from(line, 'hex');
    const key = raw.toString('utf8');
    if (!Buffer.from(key, 'utf8').equals(raw)) {
      throw new Error(`key ${keys.length} is not valid UTF-8; a JS string cannot carry it`);
    }
    keys.push(key);
  }
  return keys;
}

function writeConfig(file, servers, algorithm, options) {
  const cfg = { servers, algorithm: algorithm || null, options: options || {} };
  fs.writeFileSync(path.join(outDir, `${file}.json`), `${JSON.stringify(cfg, null, 2)}\n`);
}

const version = require('hashring/package.json').version;
const keys = readKeys(keysPath);

for (const [file, servers, algorithm, options] of configs) {
  writeConfig(file, servers, algorithm, options);
  // The server strings in the order the config lists them: array order, or the object's
  // own key order as JSON.stringify writes it (the same order HashRing sees).
  const listed = Array.isArray(servers) ? servers.slice() : Object.keys(servers);
  const ring = new HashRing(servers, algorithm || undefined, options);
  const lines = [];
  const count = new Array(listed.length).fill(0);
  keys.forEach((key, i) => {
    const got = ring.get(key);
    const again = ring.get(key); // the second call comes from the LRU cache
    if (got !== again) throw new Error(`${file}: key ${i}: get gave ${got}, then ${again}`);
    const s = listed.indexOf(got);
    if (s < 0) throw new Error(`${file}: key ${i}: get gave ${got}, not a configured server`);
    count[s]++;
    lines.push(`${i} ${s}`);
  });
  const head = [
    `# system: npm hashring ${version} (node ${process.version}), new HashRing(servers, algorithm, options) of ${file}.json`,
    '# front door: ring.get(key) (a library: no server behind it)',
    `# servers: ${listed.map((s, i) => `${i}=${s}`).join(' ')}`,
    `# keys: ${keys.length} of ${keys.length} carried`,
  ];
  fs.writeFileSync(path.join(outDir, `${file}.txt`), `${head.concat(lines).join('\n')}\n`);
  console.log(`${file}: ${keys.length} keys, per server [${count.join(', ')}], ${ring.size} points`);
}

for (const [file, servers, algorithm, options] of refusals) {
  writeConfig(file, servers, algorithm, options);
  let outcome;
  try {
    const ring = new HashRing(servers, algorithm || undefined, options);
    const got = keys.map((k) => ring.get(k));
    const none = got.filter((g) => g === undefined).length;
    outcome = `accepted with ${ring.size} points; get returned undefined for ${none} of ${keys.length} keys`;
  } catch (e) {
    outcome = `constructor threw ${e.name}: ${e.message}`;
  }
  console.log(`${file}: ${outcome}`);
}
