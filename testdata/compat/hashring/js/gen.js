// Writes the vector file of each *.json here (the three arguments of new HashRing) with the
// hashring that ../gen/package-lock.json pins: node gen.js KEYS DIR
'use strict';
const fs = require('fs');
const path = require('path');
const HashRing = require(path.join(__dirname, '..', 'gen', 'node_modules', 'hashring'));
const version = require(path.join(__dirname, '..', 'gen', 'node_modules', 'hashring', 'package.json')).version;
const [keysPath, dir] = process.argv.slice(2);
const keys = fs.readFileSync(keysPath, 'utf8').split('\n')
  .filter((l) => l !== '' && !l.startsWith('#'))
  .map((l) => (l === '-' ? '' : Buffer.from(l, 'hex').toString('utf8')));
for (const file of fs.readdirSync(dir).filter((f) => f.endsWith('.json')).sort()) {
  const cfg = JSON.parse(fs.readFileSync(path.join(dir, file), 'utf8'));
  const ring = new HashRing(cfg.servers, cfg.algorithm, cfg.options);
  const names = ring.servers.map((s) => s.string);
  const lines = [
    `# system: npm hashring ${version} (node ${process.version}), new HashRing(servers, algorithm, options) of js/${file}`,
    '# front door: ring.get(key) (a library: no server behind it)',
    '# servers: ' + names.map((n, i) => `${i}=${n}`).join(' '),
    `# keys: ${keys.length} of ${keys.length} carried`,
  ];
  keys.forEach((k, i) => {
    const s = names.indexOf(ring.get(k));
    if (s < 0) throw new Error(`${file}: key ${i}: no server`);
    lines.push(`${i} ${s}`);
  });
  fs.writeFileSync(path.join(dir, file.replace(/\.json$/, '.txt')), lines.join('\n') + '\n');
}
