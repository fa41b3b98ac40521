// Package kafkavectors reads the golden vectors of testdata/compat/kafka (the format is in
// its README) for the tests of package compat, the shard command and the Kafka client
// modules under clients/.
package kafkavectors

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Random is the partition of a placement that the client made at random ("*").
const Random = -1

// File is one vector file: one client's partitioner over the key set.
type File struct {
	Name   string // the file's name without ".txt": "java-default"
	Counts []int  // the partition counts, one per column
	// Rows holds, by key index, the partition of each count, or Random.
	Rows map[int][]int
	// Null is the "# null key (...)" line of librdkafka's files: where a NULL key goes for
	// each count, or Random; nil in the other files.
	Null []int
}

// Column returns the partitions of count n by key index, Random ones left out, and false if
// the file has no column for n.
func (f *File) Column(n int) (map[int]int, bool) {
	for c, count := range f.Counts {
		if count != n {
			continue
		}
		out := make(map[int]int, len(f.Rows))
		for k, row := range f.Rows {
			if row[c] != Random {
				out[k] = row[c]
			}
		}
		return out, true
	}
	return nil, false
}

// Read reads the vector file at path.
func Read(path string) (*File, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f := &File{Name: strings.TrimSuffix(filepath.Base(path), ".txt"), Rows: map[int][]int{}}
	sc := bufio.NewScanner(bytes.NewReader(text))
	for line := 1; sc.Scan(); line++ {
		s := sc.Text()
		var err error
		switch {
		case strings.HasPrefix(s, "# partitions: "):
			f.Counts, err = fields(strings.TrimPrefix(s, "# partitions: "))
		case strings.HasPrefix(s, "# null key ("):
			_, rest, _ := strings.Cut(s, "):")
			f.Null, err = fields(rest)
		case s == "" || s[0] == '#':
		default:
			var row []int
			if row, err = fields(s); err == nil && len(row) != len(f.Counts)+1 {
				err = fmt.Errorf("%d partitions for %d counts", len(row)-1, len(f.Counts))
			}
			if err == nil {
				f.Rows[row[0]] = row[1:]
			}
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %v", path, line, err)
		}
	}
	if len(f.Counts) == 0 || len(f.Rows) == 0 {
		return nil, fmt.Errorf("%s: no partitions line or no vectors", path)
	}
	return f, sc.Err()
}

// fields parses a line of numbers and "*".
func fields(s string) ([]int, error) {
	var out []int
	for _, x := range strings.Fields(s) {
		if x == "*" {
			out = append(out, Random)
			continue
		}
		n, err := strconv.Atoi(x)
		if err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// Keys reads testdata/compat/keys.txt: one key per line in hex, "-" for the empty key, "#"
// comments; a key's index is its position.
func Keys(path string) ([][]byte, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var keys [][]byte
	for line := range strings.Lines(string(text)) {
		line = strings.TrimRight(line, "\r\n")
		switch {
		case line == "" || line[0] == '#':
		case line == "-":
			keys = append(keys, []byte{})
		default:
			k, err := hex.DecodeString(line)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", path, err)
			}
			keys = append(keys, k)
		}
	}
	return keys, nil
}

// Pair names a partitioner of package compat and a vector file (without ".txt") of a client
// that places keys by its rule.
type Pair struct{ Partitioner, File string }

// Load reads the key set of dir (testdata/compat) and the vector files of dir/kafka that
// pairs name, by file name.
func Load(dir string, pairs ...Pair) ([][]byte, map[string]*File, error) {
	keys, err := Keys(filepath.Join(dir, "keys.txt"))
	if err != nil {
		return nil, nil, err
	}
	files := map[string]*File{}
	for _, p := range pairs {
		if files[p.File], err = Read(filepath.Join(dir, "kafka", p.File+".txt")); err != nil {
			return nil, nil, err
		}
	}
	return keys, files, nil
}
