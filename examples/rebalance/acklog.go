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
// The ledger says which writes were acknowledged: inserts (I), updates (U) and deletes (D)
// of messages, each an intent line and then, once it committed, an ack line (A) naming the
// message. Only the writer goroutine that inserted a message updates or deletes it, one write
// at a time, and never again after a write of it went unacknowledged: an ack always answers
// the message's latest intent, and each message's lines in order give its final content. A
// write with an intent and no ack is the known "unrecorded" case: a kill (or an error) came
// between its commit and its ack, so the message may show it or not and either is correct;
// the verifier counts those that show it.
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

// intendUpdate records that message m, inserted by this writer, is about to be updated to m.
func (l *ackLog) intendUpdate(m message) error {
	return l.line(fmt.Sprintf("U %d %d\n", m.ID, checksum(m)))
}

// intendDelete records that message id, inserted by this writer, is about to be deleted.
func (l *ackLog) intendDelete(id int64) error { return l.line(fmt.Sprintf("D %d\n", id)) }

// ack records that the latest intent of message id committed and was acknowledged.
func (l *ackLog) ack(id int64) error { return l.line(fmt.Sprintf("A %d\n", id)) }

func (l *ackLog) close() error { return l.f.Close() }

// written is the history of one message in the ledgers: its user, its last acknowledged
// state, the write in flight when its writer stopped (an intent without an ack), and what
// the verifier found of it.
type written struct {
	user     int64
	acked    bool   // its insert was acknowledged
	present  bool   // it exists after its last acknowledged write
	sum      uint64 // its content then, when present
	updates  int32  // acknowledged updates
	deleted  bool   // its delete was acknowledged
	pending  byte   // the write in flight at the end: 0 (none), 'I', 'U' or 'D'
	pendSum  uint64 // the content an I or U in flight writes
	seen     int32  // rows the verifier found with this ID
	mismatch int32  // of them, rows with content neither acknowledged nor in flight
	inFlight int32  // of them, rows that show the write in flight (I or U)
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
		var id int64
		if len(fields) >= 2 {
			if id, err = strconv.ParseInt(fields[1], 10, 64); err != nil {
				return bad
			}
		}
		w := out[id]
		// An update or a delete only follows an acknowledged write of a message that exists.
		follows := w != nil && w.pending == 0 && w.present
		switch {
		case len(fields) == 4 && fields[0] == "I":
			user, err1 := strconv.ParseInt(fields[2], 10, 64)
			sum, err2 := strconv.ParseUint(fields[3], 10, 64)
			if err1 != nil || err2 != nil || w != nil {
				return bad
			}
			out[id] = &written{user: user, pending: 'I', pendSum: sum}
		case len(fields) == 3 && fields[0] == "U":
			sum, err := strconv.ParseUint(fields[2], 10, 64)
			if err != nil || !follows {
				return bad
			}
			w.pending, w.pendSum = 'U', sum
		case len(fields) == 2 && fields[0] == "D":
			if !follows {
				return bad
			}
			w.pending = 'D'
		case len(fields) == 2 && fields[0] == "A":
			if w == nil || w.pending == 0 {
				return bad
			}
			switch w.pending {
			case 'I':
				w.acked, w.present, w.sum = true, true, w.pendSum
			case 'U':
				w.updates++
				w.sum = w.pendSum
			case 'D':
				w.deleted, w.present = true, false
			}
			w.pending, w.pendSum = 0, 0
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
