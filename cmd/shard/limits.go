package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"os"
	"strconv"
	"unicode/utf8"

	"github.com/shardkit/shard/internal/ring"
	"github.com/shardkit/shard/pool"
)

// The command's limits. Every numeric flag has an upper bound, checked as the flag is parsed,
// before any work: a value above it is bad usage (exit status 2) with one line that names the
// flag and the bound. Every file the command reads is read with a size limit and a limit on
// its lines, so that no input, typed or read, makes it use memory or time out of proportion.
// The help of each verb states the limits that apply to it.
const (
	// maxShardCount bounds -n, -to, -to-n, -resize and -split/-merge: shard numbers are
	// int32 in every strategy; each strategy's own limit, lower for most, is listed by help.
	maxShardCount = 1<<31 - 1
	// maxVnodes bounds -vnodes: a ring holds at most this many points.
	maxVnodes = ring.MaxPoints
	// maxPartitionsFlag bounds -partitions: the most partitions of any strategy (2^24, paged
	// partitions; the partitions strategy itself takes up to 65536).
	maxPartitionsFlag = 1 << 24
	// maxReplicas bounds locate -replicas: the most nodes of any pool.
	maxReplicas = pool.MaxWeight
	// maxShown bounds plan -flows and -ranges, the rows printed.
	maxShown = 1 << 20
	// maxStreamKeys bounds the keys locate reads from stdin, and maxPlanKeys plan -keys and
	// the keys plan reads: at a few hundred nanoseconds a key, a few seconds.
	maxStreamKeys = 10_000_000
	maxPlanKeys   = 10_000_000
	// maxStreamKeyBytes bounds the bytes of keys locate reads from stdin: 128 MiB of binary
	// junk take it about five seconds to print back quoted. maxPlanKeyBytes bounds those plan
	// reads from a file or stdin.
	maxStreamKeyBytes = 1 << 27
	maxPlanKeyBytes   = 1 << 28
	// maxCompareKeys bounds compare -keys and the keys compare reads: compare holds its keys
	// in memory, and places them a few dozen times.
	maxCompareKeys = 10_000_000
	// maxCompareKeyBytes bounds the bytes of compare's keys, random (-keys × -keylen) or read.
	maxCompareKeyBytes = 1 << 28
	// maxKeyLen bounds -keylen, the length of a random key.
	maxKeyLen = 4096
	// maxKeyLine is the longest key a key file or stdin may hold.
	maxKeyLine = 64 << 10
	// maxCompareShards bounds compare -shards: rendezvous places each key in time
	// proportional to the shards, and compare places a million keys many times.
	maxCompareShards = 1024
	// maxCompareVnodes bounds compare -vnodes: its pools section builds a ring of 100 nodes of
	// weights 1 to 4 with -vnodes points per unit of weight, which must stay within maxVnodes.
	maxCompareVnodes = 16384
	// maxRounds bounds compare -rounds, each about 2 ms per strategy.
	maxRounds = 1000
	// maxSeeds bounds compare -seeds, the rings of the vnodes experiment, each placing -keys
	// UUIDs 19 times.
	maxSeeds = 20
	// maxFileBytes bounds a configuration (-config) or saved table (-table, table FILE):
	// the largest a preset or table can use is a few megabytes.
	maxFileBytes = 16 << 20
	// maxFileLine bounds a line of a configuration or saved table.
	maxFileLine = 1 << 20
	// maxTableFiles bounds the files of table show and check: 1 GiB read at most.
	maxTableFiles = 64
)

// errLimit marks input refused because it is over one of the command's limits.
var errLimit = errors.New("over the command's limit")

// boundedInt is an int flag with an upper bound, checked by Set, so that a value over it is
// refused before any work, in one line that names the flag and the bound.
type boundedInt struct {
	p   *int
	max int
}

func (b *boundedInt) Set(s string) error {
	v, err := strconv.ParseInt(s, 0, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return fmt.Errorf("want a whole number, at most %d", b.max)
	}
	if err != nil || v > int64(b.max) {
		return fmt.Errorf("want at most %d", b.max)
	}
	if v < -1<<31 { // smaller values are refused later, as every other below the minimum
		v = -1 << 31
	}
	*b.p = int(v)
	return nil
}

func (b *boundedInt) String() string {
	if b == nil || b.p == nil {
		return "0"
	}
	return strconv.Itoa(*b.p)
}

// intFlag defines an int flag whose value is at most max. Its usage should name the value in
// backquotes, as flag.PrintDefaults shows it; " (at most MAX)" is added to it.
func intFlag(fs *flag.FlagSet, p *int, name string, value, max int, usage string) {
	*p = value
	fs.Var(&boundedInt{p, max}, name, fmt.Sprintf("%s (at most %d)", usage, max))
}

// readFile reads the configuration or table at path, refusing one over maxFileBytes or with a
// line over maxFileLine before reading it all; what names the file's role in errors.
func readFile(what, path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readLimited(f, what, path)
}

// readLimited reads r as readFile reads a file.
func readLimited(r io.Reader, what, name string) ([]byte, error) {
	text, err := io.ReadAll(io.LimitReader(r, maxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(text) > maxFileBytes {
		return nil, fmt.Errorf("%s: a %s is at most %d bytes (16 MiB): %w", name, what, maxFileBytes, errLimit)
	}
	line := 1
	for rest := text; len(rest) > 0; line++ {
		i := bytes.IndexByte(rest, '\n')
		if i < 0 {
			i = len(rest)
		}
		if i > maxFileLine {
			return nil, fmt.Errorf("%s: line %d: a line of a %s is at most %d bytes (1 MiB): %w", name, line, what, maxFileLine, errLimit)
		}
		rest = rest[min(i+1, len(rest)):]
	}
	return text, nil
}

// keyLimits are the limits of a key file or of stdin.
type keyLimits struct {
	keys, bytes int
	// bound names whose limits they are in errors: "compare's bound".
	bound string
}

var (
	streamKeyLimits  = keyLimits{maxStreamKeys, maxStreamKeyBytes, "locate's bound"}
	planKeyLimits    = keyLimits{maxPlanKeys, maxPlanKeyBytes, "plan's bound"}
	compareKeyLimits = keyLimits{maxCompareKeys, maxCompareKeyBytes, "compare's bound"}
)

// scanKeys yields the keys of r, one per line (a final "\r" dropped), naming name in errors:
// a line over maxKeyLine, more keys than lim.keys or more bytes than lim.bytes end the
// sequence with an error wrapping errLimit. warn, if not nil, is called once if the keys look
// binary: a NUL byte or bytes that are not UTF-8 in the first megabyte.
func scanKeys(r io.Reader, name string, lim keyLimits, warn func(string)) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 0, 64<<10), maxKeyLine+2) // the key, "\r" and "\n"
		count, size, checked := 0, 0, 0
		for sc.Scan() {
			line := sc.Bytes()
			count++
			size += len(line) + 1
			line, _ = bytes.CutSuffix(line, []byte("\r"))
			switch {
			case len(line) > maxKeyLine:
				yield("", fmt.Errorf("%s: line %d: a key is at most %d bytes: %w", name, count, maxKeyLine, errLimit))
				return
			case count > lim.keys:
				yield("", fmt.Errorf("%s: more than %d keys (%s): %w", name, lim.keys, lim.bound, errLimit))
				return
			case size > lim.bytes:
				yield("", fmt.Errorf("%s: more than %d bytes of keys (%s): %w", name, lim.bytes, lim.bound, errLimit))
				return
			}
			if warn != nil && checked < 1<<20 {
				checked += len(line)
				if bytes.IndexByte(line, 0) >= 0 || !utf8.Valid(line) {
					warn(fmt.Sprintf("%s looks binary: line %d holds a NUL byte or bytes that are not UTF-8; keys are read one per line", name, count))
					warn = nil
				}
			}
			if !yield(string(line), nil) {
				return
			}
		}
		if err := sc.Err(); err != nil {
			if errors.Is(err, bufio.ErrTooLong) {
				err = fmt.Errorf("line %d: a key is at most %d bytes: %w", count+1, maxKeyLine, errLimit)
			}
			yield("", fmt.Errorf("%s: %w", name, err))
		}
	}
}
