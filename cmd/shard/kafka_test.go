package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
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
			want := kafkaColumn(t, filepath.Join(root, "kafka", c.file+".txt"), 64)
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

// kafkaColumn reads the partitions of count n from a vector file of testdata/compat/kafka.
func kafkaColumn(t *testing.T, path string, n int) map[int]int {
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	col, out := -1, map[int]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if rest, ok := strings.CutPrefix(line, "# partitions: "); ok {
			for i, c := range strings.Fields(rest) {
				if c == strconv.Itoa(n) {
					col = i
				}
			}
			continue
		}
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		require.GreaterOrEqual(t, col, 0, "%s: no column for %d partitions", path, n)
		f := strings.Fields(line)
		k, err := strconv.Atoi(f[0])
		require.NoError(t, err)
		p, err := strconv.Atoi(f[1+col])
		require.NoError(t, err)
		out[k] = p
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, out)
	return out
}
