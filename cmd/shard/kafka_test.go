package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/shardkit/shard/internal/kafkavectors"
)

// TestKafkaPresetMatchesVectors runs shard locate -preset kafka over the key set for three
// clients' partitioners and compares every key's partition with the vectors of
// testdata/compat/kafka, made by running the clients' own partitioners. Keys holding a line
// break cannot travel one per line on stdin and are left out.
func TestKafkaPresetMatchesVectors(t *testing.T) {
	root := filepath.Join("..", "..", "testdata", "compat")
	keys := compatKeys(t, filepath.Join(root, "keys.txt"))
	var in strings.Builder
	var sent []int
	for i, k := range keys {
		if !strings.ContainsAny(k, "\n\r") {
			in.WriteString(k + "\n")
			sent = append(sent, i)
		}
	}
	checked := 0
	for _, c := range []struct{ file, config string }{
		{"java-default", ""}, // no -config: the Java client's default
		{"sarama-hash", "partitioner=fnv1a\n"},
		{"librdkafka-consistent", "partitioner=consistent\n"},
		{"kafkajs-legacy", "partitioner = kafkajs_legacy\n"},
	} {
		t.Run(c.file, func(t *testing.T) {
			f, err := kafkavectors.Read(filepath.Join(root, "kafka", c.file+".txt"))
			require.NoError(t, err)
			want, ok := f.Column(64)
			require.True(t, ok)
			dir := t.TempDir()
			args := []string{"locate", "-json", "-preset", "kafka", "-partitions", "64"}
			if c.config != "" {
				require.NoError(t, os.WriteFile(filepath.Join(dir, "producer.properties"), []byte(c.config), 0o644))
				args = append(args, "-config", "producer.properties")
			}
			r := runShard(t, dir, in.String(), append(args, "-")...)
			require.Equal(t, 0, r.code, r.stderr)
			lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
			require.Len(t, lines, len(sent))
			for j, line := range lines {
				var got struct {
					Key   string
					Shard int
				}
				require.NoError(t, json.Unmarshal([]byte(line), &got))
				require.Equal(t, keys[sent[j]], got.Key)
				require.Equal(t, want[sent[j]], got.Shard, "key %d %q", sent[j], got.Key)
				checked++
			}
		})
	}
	require.Equal(t, 4*len(sent), checked)
	require.Greater(t, len(sent), len(keys)*9/10, "most keys are checked")
}
