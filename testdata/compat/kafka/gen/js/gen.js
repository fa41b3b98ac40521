// gen.js: kafkajs's partitioners over the key set, for testdata/compat/kafka.
//
// For each partitioner (Partitioners.DefaultPartitioner, formerly JavaCompatiblePartitioner,
// and Partitioners.LegacyPartitioner), each partition count and each key of keys.txt, it
// groups one message with the key (a Buffer, as a producer's user gives it) the way
// producer.send does: sendMessages.js hands the topic's partition metadata (the array of
// partition entries of the Metadata response, as cluster.findTopicPartitionMetadata returns it)
// to groupMessagesPerPartition, which calls the partitioner. Keys that are valid UTF-8 are also
// given as strings, and must land on the same partition. It writes kafkajs-default.txt and
// kafkajs-legacy.txt.
//
// Usage: node gen.js KEYS_TXT OUT_DIR
'use strict'
const fs = require('fs')
const path = require('path')
const { Partitioners } = require('kafkajs')
const groupMessagesPerPartition = require('kafkajs/src/producer/groupMessagesPerPartition')
const version = require('kafkajs/package.json').version

// 2147483647 is left out: the partitioners filter the metadata array on every call, and an
// array that long cannot be built.
const counts = [1, 2, 3, 7, 12, 64, 1000]

const [keysPath, outDir] = process.argv.slice(2)
const keys = fs
  .readFileSync(keysPath, 'utf8')
  .split('\n')
  .filter(l => l !== '' && !l.startsWith('#'))
  .map(l => (l === '-' ? Buffer.alloc(0) : Buffer.from(l, 'hex')))

// metadata returns n partition entries shaped as kafkajs's Metadata response decoder gives them.
const metadata = n =>
  Array.from({ length: n }, (_, i) => ({
    partitionErrorCode: 0,
    partitionId: i,
    leader: 0,
    replicas: [0],
    isr: [0],
    offlineReplicas: [],
  }))

const place = (partitioner, partitionMetadata, key) => {
  const groups = groupMessagesPerPartition({
    topic: 't',
    partitionMetadata,
    messages: [{ key, value: 'v' }],
    partitioner,
  })
  const got = Object.keys(groups)
  if (got.length !== 1) throw new Error('one message in ' + got.length + ' groups')
  return Number(got[0])
}

const isUTF8 = b => Buffer.from(b.toString('utf8'), 'utf8').equals(b)

for (const [name, make, what] of [
  ['default', Partitioners.DefaultPartitioner, 'Partitioners.DefaultPartitioner (= JavaCompatiblePartitioner), the default since 2.0.0'],
  ['legacy', Partitioners.LegacyPartitioner, 'Partitioners.LegacyPartitioner, the default before 2.0.0'],
]) {
  const partitioner = make()
  const rows = keys.map((_, k) => [k])
  let strings = 0
  for (const n of counts) {
    const md = metadata(n)
    keys.forEach((key, k) => {
      const p = place(partitioner, md, key)
      if (!(p >= 0 && p < n)) throw new Error(`key ${k}: partition ${p} of ${n}`)
      if (isUTF8(key)) {
        const s = place(partitioner, md, key.toString('utf8'))
        if (s !== p) throw new Error(`${name}: key ${k}: Buffer to ${p}, string to ${s}`)
        strings++
      }
      rows[k].push(p)
    })
  }
  const out = [
    `# system: kafkajs ${version} (npm), ${what}`,
    '# front door: groupMessagesPerPartition (what producer.send calls) with partition metadata of n partitions and one message keyed by a Buffer; UTF-8 keys also as strings',
    `# partitions: ${counts.join(' ')}`,
    '# null key: not placed by key: a round-robin counter that starts at random',
    ...rows.map(r => r.join(' ')),
  ]
  fs.writeFileSync(path.join(outDir, `kafkajs-${name}.txt`), out.join('\n') + '\n')
  console.error(`gen: kafkajs ${name}: ${keys.length * counts.length} placements, ${strings} also as strings`)
}
