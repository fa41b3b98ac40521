// Command gen places the key set with the partitioners of two Go Kafka clients, franz-go and
// sarama, through their own partitioner interfaces, for testdata/compat/kafka (see its
// README). It writes franz-*.txt and sarama-*.txt into -out.
//
// franz-go: kgo.StickyKeyPartitioner(hasher).ForTopic(topic).Partition(record, n), which is what
// a kgo.Client calls for a record with a key (kgo.RecordPartitioner). sarama: the Partitioner
// that each constructor returns for a topic, Partition(message, n), which is what sarama's
// producers call (async_producer.go, assignPartition).
package main

import (
	"bufio"
	"encoding/hex"
	"flag"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"log"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/IBM/sarama"
	"github.com/twmb/franz-go/pkg/kgo"
)

var counts = []int{1, 2, 3, 7, 12, 64, 1000, 2147483647}

func fnv32a(b []byte) uint32 {
	h := fnv.New32a()
	h.Write(b)
	return h.Sum32()
}

type client struct {
	file  string
	what  string // the partitioner, in the client's own words
	place func(key []byte, n int) int
	null  string // what the client does with a nil key
}

func franz(file, what string, h kgo.PartitionerHasher) client {
	p := kgo.StickyKeyPartitioner(h).ForTopic("t")
	return client{file: file, what: what, null: "not placed by key: the sticky partition (random)",
		place: func(key []byte, n int) int {
			if key == nil {
				panic("nil key")
			}
			if !p.RequiresConsistency(&kgo.Record{Key: key}) {
				log.Fatalf("%s: a keyed record does not require consistency", file)
			}
			return p.Partition(&kgo.Record{Topic: "t", Key: key}, n)
		}}
}

func saramaClient(file, what string, c sarama.PartitionerConstructor) client {
	p := c("t")
	return client{file: file, what: what, null: "not placed by key: a random partition per message",
		place: func(key []byte, n int) int {
			if !p.RequiresConsistency() {
				log.Fatalf("%s: the partitioner does not require consistency", file)
			}
			got, err := p.Partition(&sarama.ProducerMessage{Topic: "t", Key: sarama.ByteEncoder(key)}, int32(n))
			if err != nil {
				log.Fatal(err)
			}
			return int(got)
		}}
}

func main() {
	keysPath := flag.String("keys", "../../../keys.txt", "the key set")
	out := flag.String("out", "../..", "where the vector files go")
	flag.Parse()
	keys := readKeys(*keysPath)
	fv, sv := version("github.com/twmb/franz-go"), version("github.com/IBM/sarama")
	clients := []client{
		franz("franz-kafkahasher", fv+": kgo.StickyKeyPartitioner(nil), the default, = KafkaHasher(murmur2)", nil),
		franz("franz-saramacompathasher-fnv1a", fv+": kgo.StickyKeyPartitioner(kgo.SaramaCompatHasher(fnv32a))", kgo.SaramaCompatHasher(fnv32a)),
		franz("franz-saramahasher-fnv1a", fv+": kgo.StickyKeyPartitioner(kgo.SaramaHasher(fnv32a)), 64-bit int", kgo.SaramaHasher(fnv32a)),
		franz("franz-saramahasher-crc32", fv+": kgo.StickyKeyPartitioner(kgo.SaramaHasher(crc32.ChecksumIEEE)), 64-bit int", kgo.SaramaHasher(crc32.ChecksumIEEE)),
		saramaClient("sarama-hash", sv+": sarama.NewHashPartitioner, the default", sarama.NewHashPartitioner),
		saramaClient("sarama-referencehash", sv+": sarama.NewReferenceHashPartitioner", sarama.NewReferenceHashPartitioner),
		saramaClient("sarama-consistentcrc", sv+": sarama.NewConsistentCRCHashPartitioner", sarama.NewConsistentCRCHashPartitioner),
		saramaClient("sarama-murmur2", sv+": sarama.NewMurmur2Partitioner", sarama.NewMurmur2Partitioner),
	}
	if strconv.IntSize != 64 {
		log.Fatal("run on a 64-bit platform: kgo.SaramaHasher depends on the width of int")
	}
	for _, c := range clients {
		var b strings.Builder
		fmt.Fprintf(&b, "# system: %s\n", c.what)
		fmt.Fprintf(&b, "# front door: the client's partitioner interface, called for a record with the key as bytes\n")
		fmt.Fprintf(&b, "# partitions:")
		for _, n := range counts {
			fmt.Fprintf(&b, " %d", n)
		}
		fmt.Fprintf(&b, "\n# null key: %s\n", c.null)
		for k, key := range keys {
			fmt.Fprintf(&b, "%d", k)
			for _, n := range counts {
				p := c.place(key, n)
				for range 3 { // a keyed placement is a function of the key
					if again := c.place(key, n); again != p {
						log.Fatalf("%s: key %d: %d then %d", c.file, k, p, again)
					}
				}
				if p < 0 || p >= n {
					log.Fatalf("%s: key %d: partition %d of %d", c.file, k, p, n)
				}
				fmt.Fprintf(&b, " %d", p)
			}
			b.WriteByte('\n')
		}
		if err := os.WriteFile(filepath.Join(*out, c.file+".txt"), []byte(b.String()), 0o644); err != nil {
			log.Fatal(err)
		}
	}
	log.Printf("gen: %d clients x %d keys x %d counts", len(clients), len(keys), len(counts))
}

// readKeys reads keys.txt: hex per line, "-" for the empty key (given as a non-nil empty slice).
func readKeys(path string) [][]byte {
	f, err := os.Open(path)
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	var keys [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		k := []byte{}
		if line != "-" {
			if k, err = hex.DecodeString(line); err != nil {
				log.Fatal(err)
			}
		}
		keys = append(keys, k)
	}
	if err := sc.Err(); err != nil {
		log.Fatal(err)
	}
	return keys
}

// version returns "path vX" of a module in the build.
func version(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == path {
				return path + " " + d.Version
			}
		}
	}
	return path + " (version unknown)"
}
