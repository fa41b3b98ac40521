package main

import (
	"fmt"
	"math/bits"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// histogram counts durations in logarithmic buckets, HDR-style: 32 sub-buckets per power of
// two of nanoseconds, so a percentile is exact to within 1/32 (3%) whatever the range, in a
// fixed 2,048 counters, and histograms of several processes add up. Safe for concurrent use.
type histogram struct {
	mu     sync.Mutex
	counts [64 * subBuckets]uint64
	n      uint64
}

const subBits = 5
const subBuckets = 1 << subBits

func bucketOf(d time.Duration) int {
	v := uint64(max(d, 1))
	if v < subBuckets {
		return int(v)
	}
	exp := bits.Len64(v) - 1 - subBits // v >> exp is in [32, 64)
	return (exp+1)*subBuckets + int(v>>exp) - subBuckets
}

// lowest is the smallest duration of bucket b (its upper bound is the next bucket's lowest).
func lowest(b int) time.Duration {
	if b < 2*subBuckets {
		return time.Duration(b)
	}
	exp := b/subBuckets - 1
	return time.Duration(uint64(b%subBuckets+subBuckets) << exp)
}

func (h *histogram) record(d time.Duration) {
	b := bucketOf(d)
	h.mu.Lock()
	h.counts[b]++
	h.n++
	h.mu.Unlock()
}

func (h *histogram) add(o *histogram) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
}

// percentile returns the upper bound of the bucket that holds the q-th quantile (q in
// [0, 1]), so it never understates; 0 if the histogram is empty.
func (h *histogram) percentile(q float64) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 {
		return 0
	}
	rank := uint64(q*float64(h.n-1)) + 1
	var seen uint64
	for b, c := range h.counts {
		if seen += c; seen >= rank {
			return lowest(b + 1)
		}
	}
	return lowest(len(h.counts))
}

// encode writes the non-empty buckets as "bucket:count,..." for a STATS line.
func (h *histogram) encode() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var b strings.Builder
	for i, c := range h.counts {
		if c > 0 {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, "%d:%d", i, c)
		}
	}
	return b.String()
}

func decodeHistogram(s string) (*histogram, error) {
	h := &histogram{}
	if s == "" || s == "-" {
		return h, nil
	}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, ":")
		b, err1 := strconv.Atoi(k)
		c, err2 := strconv.ParseUint(v, 10, 64)
		if !ok || err1 != nil || err2 != nil || b < 0 || b >= len(h.counts) {
			return nil, fmt.Errorf("bad histogram bucket %q", kv)
		}
		h.counts[b] += c
		h.n += c
	}
	return h, nil
}

// Foreground operations are classified by what the placement record said when they
// started: no migration (idle), a migration that moves this owner, or one that does not.
const (
	classIdle = iota
	classMoving
	classStaying
	classes
)

var classNames = [classes]string{"idle", "migrating, owner moving", "migrating, owner not moving"}

// latencies are the foreground histograms of one process, or of all: reads and writes by
// class.
type latencies struct {
	reads, writes [classes]histogram
}

func (l *latencies) add(o *latencies) {
	for c := range classes {
		l.reads[c].add(&o.reads[c])
		l.writes[c].add(&o.writes[c])
	}
}

// vmHWM returns the peak resident set size of process pid (VmHWM in /proc/pid/status), in
// bytes, or 0 if it cannot be read (the process is gone, or this is not Linux).
func vmHWM(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(rest) // "  12345 kB"
			if len(f) == 2 && f[1] == "kB" {
				if kb, err := strconv.ParseInt(f[0], 10, 64); err == nil {
					return kb << 10
				}
			}
		}
	}
	return 0
}

// Every incarnation of an application process keeps its figures (its STATS line: counts and
// histograms) in a file of its own beside its ledger, rewritten whole every statsInterval
// and at exit, so that a killed incarnation's figures count too, up to its last interval.
// A histogram has a fixed size, so the file does not grow with the run; it is written to a
// temporary name and renamed, so the parent never reads half of one.

// statsInterval is how often an application process rewrites its figures: a process killed
// with SIGKILL loses at most this much of them.
const statsInterval = time.Second

// statsName is the figures file of one incarnation of application process proc.
func statsName(dir string, proc, pid int) string {
	return filepath.Join(dir, fmt.Sprintf("app%d-pid%d.stats", proc, pid))
}

// writeStats replaces the file name with line.
func writeStats(name, line string) error {
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, []byte(line+"\n"), 0o644); err != nil {
		return fmt.Errorf("figures: %w", err)
	}
	if err := os.Rename(tmp, name); err != nil {
		return fmt.Errorf("figures: %w", err)
	}
	return nil
}

// readStats reads the figures of every incarnation of every application process in dir,
// each parsed as parseStats does a STATS line.
func readStats(dir string) ([]map[string]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "app*-pid*.stats"))
	if err != nil {
		return nil, err
	}
	var out []map[string]string
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("figures: %w", err)
		}
		rest, ok := strings.CutPrefix(strings.TrimSuffix(string(b), "\n"), "STATS ")
		if !ok {
			return nil, fmt.Errorf("figures %s: not a STATS line: %.40q", name, b)
		}
		out = append(out, parseStats("app", rest))
	}
	return out, nil
}

// figures are the foreground figures of application processes, added up.
type figures struct {
	lat                                      latencies
	writes, updates, deletes, reads, retries int64
	incarnations                             int
}

// mergeFigures adds up the figures of parsed STATS lines; the histograms add exactly, bucket
// by bucket.
func mergeFigures(stats []map[string]string) (*figures, error) {
	f := &figures{}
	for _, s := range stats {
		if s["role"] != "app" {
			continue
		}
		for c := range classes {
			for _, h := range []struct {
				key string
				to  *histogram
			}{{fmt.Sprintf("r%d", c), &f.lat.reads[c]}, {fmt.Sprintf("w%d", c), &f.lat.writes[c]}} {
				got, err := decodeHistogram(s[h.key])
				if err != nil {
					return nil, fmt.Errorf("figures, %s: %w", h.key, err)
				}
				h.to.add(got)
			}
		}
		f.writes += atoi(s["writes"])
		f.updates += atoi(s["updates"])
		f.deletes += atoi(s["deletes"])
		f.reads += atoi(s["reads"])
		f.retries += atoi(s["retries"])
		f.incarnations++
	}
	return f, nil
}
