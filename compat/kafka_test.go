package compat

import (
	"errors"
	"hash/crc32"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardkit/shard"
	"github.com/shardkit/shard/internal/kafkavectors"
)

// kafkaFiles maps every vector file of testdata/compat/kafka to the partitioner that must
// reproduce it, with the number of placements it holds and of those the client made at
// random ("*"), which no placement reproduces.
var kafkaFiles = map[string]struct {
	partitioner    string
	placed, random int
}{
	"java-default":                   {"murmur2", 16000, 0},
	"librdkafka-murmur2":             {"murmur2", 16000, 0},
	"librdkafka-murmur2_random":      {"murmur2_random", 16000, 0},
	"librdkafka-consistent":          {"consistent", 16000, 0},
	"librdkafka-consistent_random":   {"consistent_random", 15993, 7}, // the empty key, 7 counts above 1
	"librdkafka-fnv1a":               {"fnv1a", 16000, 0},
	"librdkafka-fnv1a_random":        {"fnv1a_random", 16000, 0},
	"franz-kafkahasher":              {"murmur2", 16000, 0},
	"franz-saramacompathasher-fnv1a": {"fnv1a", 16000, 0},
	"franz-saramahasher-fnv1a":       {"fnv1a_unsigned", 16000, 0},
	"franz-saramahasher-crc32":       {"consistent", 16000, 0},
	"sarama-hash":                    {"fnv1a", 16000, 0},
	"sarama-referencehash":           {"fnv1a_reference", 16000, 0},
	"sarama-consistentcrc":           {"consistent", 16000, 0},
	"sarama-murmur2":                 {"murmur2", 16000, 0},
	"kafkajs-default":                {"murmur2", 14000, 0},
	"kafkajs-legacy":                 {"kafkajs_legacy", 14000, 0},
}

// TestKafkaVectors requires every placement of every client's vector file, through NewKafka's
// Locate and through KafkaPartitioner.Partition, with the exact counts of kafkaFiles.
func TestKafkaVectors(t *testing.T) {
	paths, err := filepath.Glob(filepath.Join(vectorDir, "kafka", "*.txt"))
	require.NoError(t, err)
	require.Len(t, paths, len(kafkaFiles), "a vector file without an entry in kafkaFiles, or the reverse")
	ks := keys(t)
	total := 0
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".txt")
		want, ok := kafkaFiles[name]
		require.True(t, ok, "%s is not in kafkaFiles", path)
		v, err := kafkavectors.Read(path)
		require.NoError(t, err)
		require.Len(t, v.Rows, len(ks), "%s: one line per key", name)
		placed, random := 0, 0
		for c, n := range v.Counts {
			k, err := NewKafka(want.partitioner, n)
			require.NoError(t, err)
			p := k.Partitioner()
			wrong := 0
			for ki, row := range v.Rows {
				if row[c] == kafkavectors.Random {
					random++
					continue
				}
				placed++
				got, gotBytes := k.Locate(ks[ki]), p.Partition([]byte(ks[ki]), n)
				if got != row[c] || gotBytes != row[c] {
					if wrong < 5 {
						t.Errorf("%s: key %d %q, %d partitions: Locate = %d, Partition = %d, want %d", name, ki, ks[ki], n, got, gotBytes, row[c])
					}
					wrong++
				}
			}
			// librdkafka's consistent, murmur2 and fnv1a hash a NULL key as the empty one.
			if v.Null != nil && v.Null[c] != kafkavectors.Random {
				require.Equal(t, v.Null[c], k.Locate(""), "%s: the NULL key, %d partitions", name, n)
				require.Equal(t, v.Null[c], p.Partition(nil, n), "%s: the NULL key, %d partitions", name, n)
			}
		}
		require.Equal(t, want.placed, placed, "%s: placements checked", name)
		require.Equal(t, want.random, random, "%s: random placements", name)
		total += placed
	}
	require.Equal(t, 267993, total)
	require.Equal(t, total, kafkaPreset.Checked, "the preset's Checked")
	t.Logf("kafka: %d vectors of %d files checked", total, len(paths))
}

// The hashes against the standard library's (FNV-1a, CRC-32) on random keys of every length
// up to 40, and the sign rules against their plain statements in int64 arithmetic.
func TestKafkaCrossCheck(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 20000 {
		key := make([]byte, i%41)
		for j := range key {
			key[j] = byte(r.Uint32())
		}
		n := []int{1, 2, 3, 7, 12, 1000, math.MaxInt32, 1 + r.IntN(math.MaxInt32)}[i%8]
		f := fnv.New32a()
		f.Write(key)
		fh := f.Sum32()
		ch := crc32.ChecksumIEEE(key)
		abs := int64(int32(fh)) % int64(n)
		if abs < 0 {
			abs = -abs
		}
		for name, want := range map[string]int64{
			"fnv1a":           abs,
			"fnv1a_reference": int64(fh&0x7fffffff) % int64(n),
			"fnv1a_unsigned":  int64(fh) % int64(n),
			"consistent":      int64(ch) % int64(n),
		} {
			p, err := NewKafkaPartitioner(name)
			require.NoError(t, err)
			require.EqualValues(t, want, p.Partition(key, n), "%s(%x, %d)", name, key, n)
		}
	}
}

// A hash of MinInt32 (as int32): sarama's and librdkafka's abs give 2^31 % n, the Java rule
// 0. FNV-1a reaches it for no short key we know, so the reduction is checked directly.
func TestKafkaSignOfMinInt32(t *testing.T) {
	h := uint32(1 << 31)
	for _, n := range []int32{1, 3, 7, 1000, math.MaxInt32} {
		require.Equal(t, int((1<<31)%int64(n)), KafkaPartitioner{sign: kafkaAbs}.reduce(h, n))
		require.Equal(t, int((1<<31)%int64(n)), KafkaPartitioner{sign: kafkaUnsigned}.reduce(h, n))
		require.Equal(t, 0, KafkaPartitioner{sign: kafkaMask}.reduce(h, n))
	}
}

// aboveInt32 returns 2^31, one partition more than Kafka allows, where an int holds it, and
// -2^31 (refused too) where it does not.
func aboveInt32() int {
	n := int64(math.MaxInt32) + 1
	return int(n)
}

func TestKafkaErrors(t *testing.T) {
	for _, n := range []int{0, -1, math.MinInt, aboveInt32(), math.MaxInt} {
		if n >= 1 && n <= math.MaxInt32 { // MaxInt on 32-bit platforms
			continue
		}
		_, err := NewKafka("murmur2", n)
		require.ErrorIs(t, err, shard.ErrShardCount, "NewKafka(murmur2, %d)", n)
		require.ErrorIs(t, err, ErrConfig, "NewKafka(murmur2, %d)", n)
		require.ErrorContains(t, err, "compat: kafka: "+strconv.Itoa(n)+" partitions: allowed range is [1, 2147483647]")
	}
	_, err := NewKafka("murmur3", 12)
	require.ErrorIs(t, err, ErrConfig)
	require.NotErrorIs(t, err, shard.ErrShardCount)
	var ce *ConfigError
	require.True(t, errors.As(err, &ce))
	require.Equal(t, `compat: kafka: unknown partitioner "murmur3": want one of `+strings.Join(KafkaPartitioners(), ", "), err.Error())
	_, err = NewKafka(strings.Repeat("x", 1000), 12)
	require.Less(t, len(err.Error()), 300, "the error quotes an excerpt")

	k, err := NewKafka("fnv1a", 12)
	require.NoError(t, err)
	for _, n := range []int{0, -5, aboveInt32()} {
		require.ErrorIs(t, k.Resize(n), shard.ErrShardCount)
		require.Equal(t, 12, k.Shards(), "a failed Resize changes nothing")
	}
	require.NoError(t, k.Resize(math.MaxInt32))
	require.Equal(t, math.MaxInt32, k.Shards())
	require.Panics(t, func() { k.Partitioner().Partition([]byte("x"), 0) })
}

func TestKafkaZeroAndResize(t *testing.T) {
	var k Kafka
	require.Equal(t, 0, k.Shards())
	require.Equal(t, 0, k.Locate("user:1"))
	require.Equal(t, "murmur2", k.Partitioner().Name())
	require.NoError(t, k.Resize(12))
	want, err := NewKafka("murmur2", 12)
	require.NoError(t, err)
	for _, key := range keys(t) {
		require.Equal(t, want.Locate(key), k.Locate(key))
		require.Equal(t, want.Locate(key), KafkaPartitioner{}.Partition([]byte(key), 12))
	}
	var s shard.Sharder = &k // the contract of package shard
	require.NoError(t, s.Resize(1))
	require.Equal(t, 0, s.Locate("user:1"))
}

func TestKafkaAllocateNothing(t *testing.T) {
	for _, name := range KafkaPartitioners() {
		k, err := NewKafka(name, 12)
		require.NoError(t, err)
		p := k.Partitioner()
		for _, key := range []string{"", "user:1000", strings.Repeat("x", 1000)} {
			b := []byte(key)
			require.Zero(t, testing.AllocsPerRun(100, func() { _ = k.Locate(key) }), "%s: Locate", name)
			require.Zero(t, testing.AllocsPerRun(100, func() { _ = p.Partition(b, 12) }), "%s: Partition", name)
		}
	}
}

func TestParseKafka(t *testing.T) {
	for _, c := range []struct{ text, want string }{
		{"", "murmur2"},
		{"# nothing\n\nbootstrap.servers=127.0.0.1:9092\n", "murmur2"},
		{"partitioner=fnv1a_random\n", "fnv1a_random"},
		{"  partitioner : consistent  \r\n", "consistent"},
		{"partitioner murmur2", "murmur2"},
		{"acks=all\npartitioner=kafkajs_legacy\nlinger.ms=5", "kafkajs_legacy"},
		{"partitioner.class=org.apache.kafka.clients.producer.internals.DefaultPartitioner\n", "murmur2"},
		{"partitioner.class=org.apache.kafka.clients.producer.\\\n    internals.DefaultPartitioner\n", "murmur2"},
		{"partitioner.ignore.keys=False\npartitioner.adaptive.partitioning.enable=false\npartitioner.availability.timeout.ms=0\n", "murmur2"},
		{"sasl.jaas.config=a \\\n  partitioner=fnv1a\n", "murmur2"}, // a continued line, not a property
		{"! partitioner=fnv1a\n", "murmur2"},
	} {
		p, err := ParseKafka([]byte(c.text))
		require.NoError(t, err, "%q", c.text)
		require.Equal(t, c.want, p.Name(), "%q", c.text)
	}
	for _, c := range []struct {
		text string
		line int
		msg  string
	}{
		{"partitioner=murmur3\n", 1, `partitioner="murmur3": want one of`},
		{"\npartitioner=random\n", 2, "places records without their key"},
		{"partitioner=fnv1a\npartitioner=fnv1a\n", 2, "partitioner is set twice (also on line 1)"},
		{"partitioner=fnv1a\npartitioner.class=org.apache.kafka.clients.producer.internals.DefaultPartitioner\n", 2, "name the partitioners of two clients"},
		{"partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner\n", 1, "without their key"},
		{"partitioner.class=com.example.MyPartitioner\n", 1, "a partitioner of one's own"},
		{"partitioner.ignore.keys=true\n", 1, "places records without their key"},
		{"partitioner.ignore.keys=yes\n", 1, "want true or false"},
		{"a=1\npartitioner.type=murmur2\n", 2, `unknown property "partitioner.type"`},
		{"partitioner=\\\n\\\n\\\nbad", 1, `partitioner="bad"`},
		{"acks=1\n\x00\xff garbage {\n", 2, "is not a property name"},
		{"=murmur2\n", 1, `"" is not a property name`},
	} {
		_, err := ParseKafka([]byte(c.text))
		require.ErrorIs(t, err, ErrConfig, "%q", c.text)
		var ce *ConfigError
		require.True(t, errors.As(err, &ce))
		require.Equal(t, c.line, ce.Line, "%q: %v", c.text, err)
		require.ErrorContains(t, err, "compat: kafka: line "+strconv.Itoa(c.line)+": ")
		require.ErrorContains(t, err, c.msg)
	}
}

// FuzzParseKafka: ParseKafka never panics, returns a named partitioner or a *ConfigError
// wrapping ErrConfig with a short message, and is deterministic.
func FuzzParseKafka(f *testing.F) {
	for _, s := range []string{"", "partitioner=fnv1a\n", "partitioner.class=x\\\ny", "a:b\r\n!c\n#d", "partitioner.ignore.keys=TRUE"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		p, err := ParseKafka(text)
		if err != nil {
			var ce *ConfigError
			if !errors.Is(err, ErrConfig) || !errors.As(err, &ce) || ce.Line < 1 {
				t.Fatalf("ParseKafka(%q) = %v", text, err)
			}
			if len(err.Error()) > 400 {
				t.Fatalf("ParseKafka(%q): an error of %d bytes", text, len(err.Error()))
			}
			return
		}
		if _, err := NewKafkaPartitioner(p.Name()); err != nil {
			t.Fatalf("ParseKafka(%q) = %q, no partitioner", text, p.Name())
		}
		if q, _ := ParseKafka(text); q != p {
			t.Fatalf("ParseKafka(%q) is not deterministic", text)
		}
	})
}

func TestKafkaPreset(t *testing.T) {
	presets := PartitionPresets()
	require.Len(t, presets, 1)
	p := presets[0]
	require.Equal(t, "kafka", p.System)
	require.NotEmpty(t, p.Doc)
	s, err := p.New(nil, 12)
	require.NoError(t, err)
	require.Equal(t, 12, s.Shards())
	require.Equal(t, "murmur2", s.(*Kafka).Partitioner().Name())
	s, err = p.New([]byte("partitioner=fnv1a\n"), 7)
	require.NoError(t, err)
	require.Equal(t, "fnv1a", s.(*Kafka).Partitioner().Name())
	_, err = p.New(nil, 0)
	require.ErrorIs(t, err, shard.ErrShardCount)
	_, err = p.New([]byte("\x00\xff garbage {\npartitioner=?"), 3)
	require.ErrorIs(t, err, ErrConfig)
}
