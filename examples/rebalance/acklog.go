package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ackLog is the ledger of one application process in -procs mode: an append-only file of its
// own, where a writer puts an intent line before it writes a message and an ack line once the
// write has committed and been acknowledged. Each line is one write(2) with no user-space
// buffer: a SIGKILL cannot lose a line the process wrote (the page cache outlives the
// process), only a power cut could, as it could lose the databases' unsynced commits too.
//
// The ledger's question is the same as in the one-process mode: which messages were
// acknowledged. A message with an intent and no ack is the known "unrecorded" case: a kill
// (or an error) came between its commit and its ack, so it may or may not be on a shard and
// either is correct; the verifier counts those it finds, once each.
type ackLog struct {
	mu sync.Mutex
	f  *os.File
}

// ackName is the file of one incarnation of application process proc: a restarted process
// opens a new one, so no two processes ever append to one file.
func ackName(dir string, proc, pid int) string {
	return filepath.Join(dir, fmt.Sprintf("app%d-pid%d.log", proc, pid))
}

func createAckLog(dir string, proc int) (*ackLog, error) {
	f, err := os.OpenFile(ackName(dir, proc, os.Getpid()), os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("ledger: %w", err)
	}
	return &ackLog{f: f}, nil
}

func (l *ackLog) line(s string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, err := l.f.WriteString(s); err != nil {
		return fmt.Errorf("ledger %s: %w", l.f.Name(), err)
	}
	return nil
}

// intend records that message m is about to be written.
func (l *ackLog) intend(m message) error {
	return l.line(fmt.Sprintf("I %d %d %d\n", m.ID, m.UserID, checksum(m)))
}

// ack records that message id committed and was acknowledged.
func (l *ackLog) ack(id int64) error { return l.line(fmt.Sprintf("A %d\n", id)) }

func (l *ackLog) close() error { return l.f.Close() }

// written is a message of an intent line, with whether an ack line followed.
type written struct {
	user  int64
	sum   uint64
	acked bool
	seen  int32 // rows the verifier found with this ID
}

// readAckLogs reads every ledger file in dir. A last line without its newline (a kill in the
// middle of a write(2), which Linux does not do to a regular file, but a torn tail is cheap
// to tolerate) is ignored: it acknowledged nothing.
func readAckLogs(dir string) (map[int64]*written, error) {
	out := map[int64]*written{}
	files, err := filepath.Glob(filepath.Join(dir, "app*-pid*.log"))
	if err != nil {
		return nil, err
	}
	for _, name := range files {
		if err := readAckLog(name, out); err != nil {
			return nil, fmt.Errorf("ledger %s: %w", name, err)
		}
	}
	return out, nil
}

func readAckLog(name string, out map[int64]*written) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	r := bufio.NewReader(f)
	for n := 1; ; n++ {
		line, err := r.ReadString('\n')
		if errors.Is(err, io.EOF) { // the end, or a torn last line
			return nil
		}
		if err != nil {
			return err
		}
		fields := strings.Fields(line)
		bad := fmt.Errorf("line %d %q: %w", n, strings.TrimSpace(line), errState)
		switch {
		case len(fields) == 4 && fields[0] == "I":
			id, err1 := strconv.ParseInt(fields[1], 10, 64)
			user, err2 := strconv.ParseInt(fields[2], 10, 64)
			sum, err3 := strconv.ParseUint(fields[3], 10, 64)
			if err1 != nil || err2 != nil || err3 != nil || out[id] != nil {
				return bad
			}
			out[id] = &written{user: user, sum: sum}
		case len(fields) == 2 && fields[0] == "A":
			id, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil || out[id] == nil {
				return bad
			}
			out[id].acked = true
		default:
			return bad
		}
	}
}

// idClock hands out the IDs of the messages one writer goroutine writes: microseconds since
// 2020 times 1024 plus the writer's slot (application process*16 + writer), strictly
// increasing per writer. No two writers share a slot, and a restarted process starts
// milliseconds after its predecessor's last ID, so IDs never repeat without any coordination;
// they are far above the loaded messages' (user*1e6 + n < 1e12), and grow with time, as an
// append-only table's keys do.
type idClock struct {
	slot int64
	last int64
}

const idEpoch = 1577836800_000_000 // 2020-01-01 in Unix microseconds

func (c *idClock) next() int64 {
	id := (time.Now().UnixMicro()-idEpoch)<<10 | c.slot
	if id <= c.last {
		id = c.last + 1024
	}
	c.last = id
	return id
}
